"""One scaler per target (controller/target_owner.py): of two TaskScalers
naming the same target, the one whose ``namespace/name`` sorts first scales
it; the other changes nothing and reports TargetConflict until the owner is
deleted or points elsewhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import redis

from support.controller import MemoryActuator, enqueue
from taskscale.controller.config import RedisRef, ScalerConfig, TargetRef
from taskscale.controller.job_spec import JobTarget
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import Problem
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings
from taskscale.controller.target_owner import shadowed
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.keys import Keys

KEYS = Keys("taskscale")


def config(name: str, target: str = "email-worker", **changes: object) -> ScalerConfig:
    policy = ScalingPolicy(
        types=(TypePolicy("email", idle_threshold_s=0.0),),
        tasks_per_replica=1,
        max_replicas=10,
        scale_down_stabilization_s=0.0,
    )
    base = ScalerConfig(
        name=name,
        namespace="default",
        target=target,
        redis=RedisRef(url="unused"),
        policy=policy,
        poll_interval_s=3600.0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_first_name_owns_a_shared_target_and_the_others_are_named() -> None:
    configs = [config("c"), config("a"), config("b"), config("solo", target="other")]
    assert shadowed(configs) == {"default/b": "default/a", "default/c": "default/a"}


def test_other_namespaces_kinds_and_job_mode_do_not_conflict() -> None:
    stateful = TargetRef(api_version="apps/v1", kind="StatefulSet")
    job = JobTarget(metadata={}, spec={"template": {"spec": {"containers": []}}})
    configs = [
        config("a"),
        config("b", namespace="elsewhere"),
        config("c", target_ref=stateful),
        config("d", target="", jobs=job),
        config("e", target="", jobs=job),
    ]
    assert shadowed(configs) == {}


@pytest.fixture
def reconciler() -> Iterator[Reconciler]:
    # a conflict's backoff far beyond the test: a pass that runs was made due
    settings = ReconcilerSettings(error_backoff_initial_s=600.0, error_backoff_max_s=600.0)
    rec = Reconciler(metrics=ControllerMetrics(), settings=settings)
    yield rec
    rec.close()


@pytest.mark.integration
def test_only_the_owner_scales_until_it_is_removed(
    reconciler: Reconciler, r: redis.Redis, redis_url: str
) -> None:
    owner, other = MemoryActuator(replicas=0), MemoryActuator(replicas=0)
    reconciler.upsert(config("b-second"), actuator=other, redis_url=redis_url)
    reconciler.upsert(config("a-first"), actuator=owner, redis_url=redis_url)
    enqueue(r, KEYS, "email", 3)

    outcome = reconciler.reconcile_now("default/b-second")
    assert outcome.problem == Problem.TARGET_CONFLICT
    assert "is scaled by TaskScaler a-first" in outcome.message
    assert outcome.decision is None and other.calls == []  # nothing read or changed
    assert reconciler.reconcile_now("default/a-first").ok
    assert owner.replicas == 3

    reconciler.remove("default/a-first")
    reconciler.reconcile_due()  # its pass is due at once, not after the conflict's backoff
    assert other.replicas == 3


@pytest.mark.integration
def test_a_conflict_ends_when_the_owner_points_elsewhere(
    reconciler: Reconciler, r: redis.Redis, redis_url: str
) -> None:
    owner, other = MemoryActuator(replicas=0), MemoryActuator(replicas=0)
    reconciler.upsert(config("a-first"), actuator=owner, redis_url=redis_url)
    reconciler.upsert(config("b-second"), actuator=other, redis_url=redis_url)
    enqueue(r, KEYS, "email", 2)
    assert reconciler.reconcile_now("default/b-second").problem == Problem.TARGET_CONFLICT
    reconciler.upsert(config("a-first", target="sms-worker"), actuator=owner, redis_url=redis_url)
    reconciler.reconcile_due()
    assert other.replicas == 2 and owner.replicas == 2  # each its own target now
