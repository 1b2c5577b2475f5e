"""The queue-wait target (queue_wait.py), one rule per test, pure; and the
observer's oldest-task ages on the Redis clock, against a real Redis."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
import redis

from taskscale.controller.config import InvalidSpec, config_from_spec
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.policy import History, decide
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
)
from taskscale.keys import DEFAULT_PRIORITY, Keys
from taskscale.producer import Producer

T0 = 1_763_750_000.0


def policy(target_s: float | None = 10.0, **settings: Any) -> ScalingPolicy:
    base: dict[str, Any] = {
        "tasks_per_replica": 4,
        "max_replicas": 20,
        "scale_down_stabilization_s": 0.0,
    }
    base.update(settings)
    return ScalingPolicy(types=(TypePolicy("a", max_queue_wait_s=target_s),), **base)


def busy(pods: int) -> tuple[WorkerObservation, ...]:
    return tuple(WorkerObservation(f"w{i}", f"p{i}", ("a",), 4, 4) for i in range(pods))


def decision_for(p: ScalingPolicy, *, current: int, pods: int = 0, **fields: Any) -> Decision:
    obs = Observation(at=T0, types={"a": TypeObservation("a", **fields)}, workers=busy(pods))
    return decide(obs, p, History.for_policy(p), now=T0, current=current)


def test_under_the_target_the_count_rule_alone_sizes() -> None:
    d = decision_for(policy(), current=2, pods=2, queued=4, active=8, oldest_ready_s=9.0)
    assert (d.desired, d.reason_code) == (3, ReasonCode.DEMAND)  # ceil(12 / 4)


def test_a_type_at_its_concurrency_cap_adds_no_replicas_however_long_it_waits() -> None:
    fields = {"queued": 4, "active": 8, "oldest_ready_s": 60.0}
    capped = decision_for(policy(), current=2, pods=2, concurrency_limit=8, **fields)
    assert capped.reason_code != ReasonCode.QUEUE_WAIT and capped.desired <= 2
    below = decision_for(policy(), current=2, pods=2, concurrency_limit=100, **fields)
    assert below.reason_code == ReasonCode.QUEUE_WAIT and below.desired > 2


def test_over_the_target_replicas_grow_in_proportion_to_the_working_ones() -> None:
    d = decision_for(policy(), current=3, pods=3, queued=4, active=12, oldest_ready_s=25.0)
    # 3 working x 25/10 = 7.5 -> 8, above the count rule's ceil(16/4) = 4
    assert (d.desired, d.reason_code) == (8, ReasonCode.QUEUE_WAIT)
    assert "oldest 'a' task has waited 25 s, over its 10 s target: 8 replicas" in d.reason


def test_just_over_the_target_adds_at_least_one() -> None:
    p = policy(tasks_per_replica=8)  # the count rule says ceil(17 / 8) = 3
    d = decision_for(p, current=4, pods=4, queued=1, active=16, oldest_ready_s=10.5)
    assert (d.desired, d.reason_code) == (5, ReasonCode.QUEUE_WAIT)


def test_pods_still_starting_do_not_compound_the_step() -> None:
    # 6 replicas set, only 2 working: the rule asks from the 2, not the 6
    d = decision_for(policy(), current=6, pods=2, queued=1, active=8, oldest_ready_s=20.0)
    assert (d.desired, d.reason_code) == (6, ReasonCode.QUEUE_WAIT)  # 2 x 2 = 4: hold, no more
    assert "holding 6 (2 working)" in d.reason  # and no scale-down with an old task waiting


def test_the_rule_is_bounded_by_max_replicas_and_the_step_limit() -> None:
    capped = decision_for(
        policy(max_replicas=6), current=3, pods=3, queued=1, active=12, oldest_ready_s=100.0
    )
    assert (capped.desired, capped.reason_code) == (6, ReasonCode.MAX_REPLICAS)
    stepped = decision_for(
        policy(max_scale_up_step=2), current=3, pods=3, queued=1, active=12, oldest_ready_s=100.0
    )
    assert (stepped.desired, stepped.reason_code) == (5, ReasonCode.STEP_LIMIT)
    assert "over its 10 s target" in stepped.reason


def test_no_scale_down_while_an_old_task_waits_though_the_count_asks_for_less() -> None:
    # the count rule alone: ceil(1 / 100) = 1 of the 3 replicas; nobody working yet
    p = policy(tasks_per_replica=100)
    counted = decision_for(p, current=3, queued=1, oldest_ready_s=5.0)  # under the target
    assert counted.desired == 1
    d = decision_for(p, current=3, queued=1, oldest_ready_s=60.0)
    assert (d.desired, d.reason_code) == (3, ReasonCode.QUEUE_WAIT)
    assert "over its 10 s target: holding 3 (0 working)" in d.reason


def test_due_tasks_count_only_while_a_scheduler_can_promote_them() -> None:
    p = policy()
    fields = {"queued": 1, "due": 1, "active": 4, "oldest_ready_s": 1.0, "oldest_due_s": 40.0}
    with_scheduler = Observation(
        at=T0, types={"a": TypeObservation("a", **fields)}, workers=busy(1), schedulers_alive=1
    )
    without = replace(with_scheduler, schedulers_alive=0)
    up = decide(with_scheduler, p, History.for_policy(p), now=T0, current=1)
    held = decide(without, p, History.for_policy(p), now=T0, current=1)
    assert (up.desired, up.reason_code) == (4, ReasonCode.QUEUE_WAIT)  # 1 x 40/10
    assert held.reason_code != ReasonCode.QUEUE_WAIT


def test_a_type_without_a_target_is_not_sized_by_its_wait() -> None:
    d = decision_for(policy(None), current=2, pods=2, queued=1, active=8, oldest_ready_s=999.0)
    assert d.reason_code != ReasonCode.QUEUE_WAIT and d.desired == 3


def test_max_queue_wait_seconds_is_read_and_checked() -> None:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"name": "w"},
        "redis": {"url": "redis://127.0.0.1:6379/0"},
        "taskTypes": [{"name": "a", "maxQueueWaitSeconds": 2.5}, {"name": "b"}],
    }
    config = config_from_spec(spec, name="s", namespace="n")
    assert [t.max_queue_wait_s for t in config.policy.types] == [2.5, None]
    spec["taskTypes"] = [{"name": "a", "maxQueueWaitSeconds": 0}]
    with pytest.raises(InvalidSpec, match="maxQueueWaitSeconds"):
        config_from_spec(spec, name="s", namespace="n")


# --- the observer's ages, on the Redis clock -----------------------------------


def redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


@pytest.mark.integration
def test_observer_reads_the_oldest_ready_and_due_waits(r: redis.Redis) -> None:
    keys = Keys("taskscale")
    observer = Observer(r, keys)
    request = {"s": ObserveRequest(("email",), 30)}
    empty = observer.observe(request)["s"].types["email"]
    assert (empty.oldest_ready_s, empty.oldest_due_s) == (None, None)

    now = redis_ms(r)
    Producer(r, keys=keys).enqueue("email")  # stamped now: waits ~0 s
    old = {"id": "old", "type": "email", "enqueued_ms": now - 90_000}
    promoted = {"id": "p", "type": "email", "enqueued_ms": now - 500_000, "due_ms": now - 40_000}
    r.rpush(keys.queue("email", 0), json.dumps(old))  # the head of another priority list
    r.rpush(keys.queue("email", DEFAULT_PRIORITY), json.dumps(promoted))  # behind the fresh one
    r.zadd(keys.delayed("email"), {json.dumps({"id": "d", "type": "email"}): now - 20_000})

    t = observer.observe(request)["s"].types["email"]
    assert t.oldest_ready_s is not None and 90 <= t.oldest_ready_s < 100  # only heads are read
    assert t.oldest_due_s is not None and 20 <= t.oldest_due_s < 30

    r.lpush(keys.queue("email", 9), json.dumps(promoted))  # a promoted head waits from due_ms
    r.delete(keys.queue("email", 0))
    t = observer.observe(request)["s"].types["email"]
    assert t.oldest_ready_s is not None and 40 <= t.oldest_ready_s < 50
