"""Which types' oldest ready task the observer decodes on a pass: every pass
for the types a request names in ``ages`` (those with a queue-wait target),
every ``ages_every_s`` for the others, whose last reading is reported in
between -- and none once a type has nothing ready."""

from __future__ import annotations

import json

import redis

from support.controller import push_ready, redis_ms
from taskscale.admin import queue_purge
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.keys import Keys


def push_waiting(r: redis.Redis, keys: Keys, task_type: str, level: int, waited_s: int) -> None:
    env = {
        "id": f"{task_type}-{level}",
        "type": task_type,
        "enqueued_ms": redis_ms(r) - waited_s * 1000,
    }
    push_ready(r, keys, task_type, level, json.dumps(env))


def ready_ages(observer: Observer, request: ObserveRequest) -> dict[str, float | None]:
    types = observer.observe({"s": request})["s"].types
    return {t: o.oldest_ready_s for t, o in types.items()}


def test_types_outside_ages_are_read_every_ages_every_s_and_keep_their_reading(
    r: redis.Redis, keys: Keys
) -> None:
    push_waiting(r, keys, "watched", 5, 30)
    push_waiting(r, keys, "sampled", 5, 30)
    observer = Observer(r, keys, ages_every_s=3600)
    request = ObserveRequest(("watched", "sampled"), lead_s=0, ages=("watched",))

    first = ready_ages(observer, request)  # the first pass reads every type
    assert all(30 <= (age or 0) < 40 for age in first.values()), first

    push_waiting(r, keys, "watched", 0, 90)  # an older head on another level
    push_waiting(r, keys, "sampled", 0, 90)
    second = ready_ages(observer, request)
    assert 90 <= (second["watched"] or 0) < 100
    assert second["sampled"] == first["sampled"]  # not decoded: the last reading

    queue_purge(r, keys, "sampled")
    assert ready_ages(observer, request)["sampled"] is None  # nothing ready: no stale age

    push_waiting(r, keys, "sampled", 5, 60)
    observer.ages_every_s = 0.0  # due for a full read on every pass now
    assert 60 <= (ready_ages(observer, request)["sampled"] or 0) < 70


def test_without_ages_every_type_is_read_on_every_pass(r: redis.Redis, keys: Keys) -> None:
    push_waiting(r, keys, "any", 5, 30)
    observer = Observer(r, keys, ages_every_s=3600)
    request = ObserveRequest(("any",), lead_s=0)
    ready_ages(observer, request)
    push_waiting(r, keys, "any", 0, 90)
    assert 90 <= (ready_ages(observer, request)["any"] or 0) < 100


def test_the_reconcile_pass_asks_every_pass_for_the_queue_wait_types() -> None:
    policy = ScalingPolicy(
        types=(
            TypePolicy("a", max_queue_wait_s=10),
            TypePolicy("b"),
            TypePolicy("c", max_queue_wait_s=1),
        )
    )
    assert policy.queue_wait_types() == ("a", "c")
