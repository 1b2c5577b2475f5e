"""The controller checks the server's version the first time it uses a Redis.

The controller has no Redis of its own at start: each TaskScaler names one.
So the check every taskscale process makes at start
(taskscale.connection.check_version) is made on a Redis's first pass: a
server older than 7.0 fails that TaskScaler's pass with the one line (its
replicas held, the other TaskScalers going on), a real redis-server is read
once and then left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from support.controller import MemoryActuator, enqueue
from support.old_redis import TOO_OLD, old_redis
from taskscale.connection import connect
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import Problem, Reconciler, ReconcilerSettings, RetrySettings
from taskscale.controller.types import ReasonCode, ScalingPolicy, TypePolicy
from taskscale.keys import Keys

pytestmark = pytest.mark.integration


def scaler(name: str) -> ScalerConfig:
    policy = ScalingPolicy(
        types=(TypePolicy("email", idle_threshold_s=0.5),),
        tasks_per_replica=1,
        max_replicas=10,
        scale_down_stabilization_s=0.0,
    )
    return ScalerConfig(
        name=name,
        namespace="default",
        target=f"{name}-worker",
        redis=RedisRef(url="unused", key_namespace="taskscale"),
        policy=policy,
        poll_interval_s=3600.0,
    )


@pytest.fixture
def reconciler() -> Iterator[Reconciler]:
    settings = ReconcilerSettings(
        redis=RetrySettings(attempts=2, initial_s=0.01, max_s=0.02), redis_timeout_s=1.0
    )
    rec = Reconciler(metrics=ControllerMetrics(), settings=settings)
    yield rec
    rec.close()


def info_calls(client: redis.Redis) -> int:
    """How many INFO the server has run (its command statistics)."""
    return int(client.info("commandstats").get("cmdstat_info", {}).get("calls", 0))


def test_a_taskscaler_on_an_old_redis_fails_with_the_one_line_and_others_go_on(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    old, new = scaler("old"), scaler("new")
    held, scaled = MemoryActuator(replicas=2), MemoryActuator(replicas=0)
    enqueue(r, keys, "email", 3)
    with old_redis() as old_url:
        reconciler.upsert(old, actuator=held, redis_url=old_url)
        reconciler.upsert(new, actuator=scaled, redis_url=redis_url)

        for _ in range(2):  # refused again on the next pass: a refusal is not remembered
            outcome = reconciler.reconcile_now(old.key)
            assert outcome.problem == Problem.REDIS_UNREACHABLE
            assert outcome.message == TOO_OLD
            assert outcome.redis_error == TOO_OLD
            assert outcome.decision is not None
            assert outcome.decision.reason_code == ReasonCode.FAIL_STATIC
        assert held.replicas == 2 and not held.calls

        other = reconciler.reconcile_now(new.key)
    assert other.ok and scaled.replicas == 3


def test_a_new_enough_redis_is_read_once_then_left_alone(
    reconciler: Reconciler, redis_url: str, keys: Keys
) -> None:
    client = connect(redis_url)
    try:
        client.config_resetstat()
        config, actuator = scaler("emails"), MemoryActuator(replicas=0)
        reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
        enqueue(client, keys, "email", 2)

        outcomes = [reconciler.reconcile_now(config.key) for _ in range(3)]

        assert all(o.ok for o in outcomes) and actuator.replicas == 2
        assert info_calls(client) == 1  # the version, on the first pass only
    finally:
        client.close()
