"""The decision log: every pass of a scaler reaches Redis (its last state),
and decisions that say something new are appended to a capped timeline the
dashboard's scaling page reads (taskscale.scaling)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from support.controller import MemoryActuator, enqueue, finish_tasks, start_tasks
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import PassOutcome, Reconciler
from taskscale.controller.types import Decision, ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.scaling import read_scalers

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")


class Kept:
    def __init__(self) -> None:
        self.outcomes: list[PassOutcome] = []

    def report(self, outcome: PassOutcome) -> None:
        self.outcomes.append(outcome)


def config() -> ScalerConfig:
    policy = ScalingPolicy(
        types=(TypePolicy("email", idle_threshold_s=0.0),),
        tasks_per_replica=1,
        max_replicas=10,
        scale_down_stabilization_s=0.0,
    )
    return ScalerConfig(
        name="emails",
        namespace="default",
        target="email-worker",
        redis=RedisRef(url="unused"),
        policy=policy,
        poll_interval_s=3600.0,
    )


@pytest.fixture
def log_and_reconciler() -> Iterator[tuple[DecisionLog, Kept, Reconciler]]:
    inner = Kept()
    log = DecisionLog(inner, cap=3)
    rec = Reconciler(reporter=log, metrics=ControllerMetrics())
    yield log, inner, rec
    rec.close()
    log.close()


def test_scale_decisions_become_a_timeline_newest_first_and_the_inner_reporter_hears_all(
    log_and_reconciler: tuple[DecisionLog, Kept, Reconciler], r: redis.Redis, redis_url: str
) -> None:
    log, inner, rec = log_and_reconciler
    cfg = config()
    log.bind(cfg, redis_url)
    rec.upsert(cfg, actuator=MemoryActuator(replicas=0), redis_url=redis_url)
    enqueue(r, KEYS, "email", 3)
    rec.reconcile_now(cfg.key)
    rec.reconcile_now(cfg.key)  # the same decision again: not appended
    start_tasks(r, KEYS, "email", 3)
    finish_tasks(r, KEYS, "email", 3)
    rec.reconcile_now(cfg.key)

    [scaler] = read_scalers(r, KEYS)
    assert len(inner.outcomes) >= 3
    assert (scaler["scaler"], scaler["target"], scaler["types"]) == (
        "default/emails",
        "email-worker",
        ["email"],
    )
    assert (scaler["current"], scaler["desired"]) == (3, 0)
    assert [(d["current"], d["desired"]) for d in scaler["decisions"]] == [(3, 0), (3, 3), (0, 3)]
    assert scaler["decisions"][-1]["reason"].startswith("0 -> 3")
    assert scaler["decisions"][0]["reason_code"] == "Idle"


def test_the_timeline_is_capped_and_an_unbound_scaler_writes_nothing(
    log_and_reconciler: tuple[DecisionLog, Kept, Reconciler], r: redis.Redis, redis_url: str
) -> None:
    log, inner, rec = log_and_reconciler
    cfg = config()
    rec.upsert(cfg, actuator=MemoryActuator(replicas=0), redis_url=redis_url)
    rec.reconcile_now(cfg.key)
    assert read_scalers(r, KEYS) == [] and len(inner.outcomes) == 1
    log.bind(cfg, redis_url)
    for n in range(1, 6):
        enqueue(r, KEYS, "email", 1)
        rec.reconcile_now(cfg.key)  # desired 1, 2, ... 5: each one new
        assert read_scalers(r, KEYS)[0]["desired"] == n
    assert r.llen(KEYS.decisions(cfg.key)) == 3
    assert [d["desired"] for d in read_scalers(r, KEYS)[0]["decisions"]] == [5, 4, 3]


def test_a_sharded_scaler_records_in_the_first_namespace_of_its_list(
    r: redis.Redis, redis_url: str
) -> None:
    """A namespace list ("a,b,c") is not one namespace: binding such a scaler
    used to raise (an invalid namespace) and the controller dropped it."""
    cfg = config()
    sharded = ScalerConfig(
        name=cfg.name,
        namespace=cfg.namespace,
        target=cfg.target,
        redis=RedisRef(url="unused", key_namespace="shard-a, shard-b,shard-c"),
        policy=cfg.policy,
    )
    log = DecisionLog()
    try:
        log.bind(sharded, redis_url)
        decision = Decision(desired=2, reason_code="Demand", reason="0 -> 2: 2 queued")
        log.report(PassOutcome(sharded, 0.0, None, 0, decision, scaled=True))
    finally:
        log.close()
    [scaler] = read_scalers(r, Keys("shard-a"))
    assert (scaler["scaler"], scaler["desired"]) == ("default/emails", 2)
    assert read_scalers(r, Keys("shard-b")) == read_scalers(r, Keys("shard-c")) == []
