"""The public API (taskscale/__init__.py) answers wrong values with a
sentence naming the argument -- never with Python internals (``cannot
convert float NaN to integer``, ``'str' object has no attribute``) and never
with a Redis or Lua error after the wrong value was sent."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import redis

import taskscale as ts
from support.redis_server import free_port
from taskscale.keys import Keys
from taskscale.scheduling.scheduler import SchedulerSettings

# Nothing listens here: a call that reached Redis would fail with a
# connection error instead of the expected sentence.
DEAD = redis.Redis(port=free_port(), socket_connect_timeout=0.2)
PRODUCER = ts.Producer(DEAD, keys=Keys("t"), settings=ts.ProducerSettings(retry_for_s=0))

CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # priorities, ids, keys
    (
        "priority 1.5",
        lambda: PRODUCER.enqueue("t", priority=1.5),
        ValueError,
        "invalid priority 1.5",
    ),
    ("priority None", lambda: PRODUCER.enqueue("t", priority=None), ValueError, "invalid priority"),
    (
        "unique_key int",
        lambda: PRODUCER.enqueue("t", unique_key=5),
        ValueError,
        "invalid unique key 5",
    ),
    # durations
    (
        "unique_for nan",
        lambda: PRODUCER.enqueue("t", unique_key="k", unique_for=math.nan),
        ValueError,
        "unique_for must be a finite number of seconds >= 0, not nan",
    ),
    (
        "unique_for 1e30",
        lambda: PRODUCER.enqueue("t", unique_key="k", unique_for=1e30),
        ValueError,
        "unique_for must be at most 315360000 s",
    ),
    # batches
    ("calls None", lambda: PRODUCER.enqueue_many("t", None), TypeError, "calls must be a list"),
    ("calls str", lambda: PRODUCER.enqueue_many("t", "abc"), TypeError, "not str"),
    ("call int", lambda: PRODUCER.enqueue_many("t", [5]), TypeError, "a call's args must be"),
    ("call dict", lambda: PRODUCER.enqueue_many("t", [{"a": 1}]), TypeError, "Call(kwargs=...)"),
    ("kwargs list", lambda: ts.Call([], [1]), TypeError, "kwargs must be a dict with str keys"),
    ("kwargs int key", lambda: ts.Call([], {1: 2}), TypeError, "kwargs must be a dict"),
    # producer and its settings
    ("keys str", lambda: ts.Producer(DEAD, keys="ns"), TypeError, "Keys('ns') for a namespace"),
    ("settings dict", lambda: ts.Producer(DEAD, settings={}), TypeError, "ProducerSettings"),
    (
        "max_payload nan",
        lambda: ts.ProducerSettings(max_payload_bytes=math.nan),
        ValueError,
        "max_payload_bytes must be a whole number",
    ),
    (
        "wait_replicas huge",
        lambda: ts.ProducerSettings(wait_replicas=10**30),
        ValueError,
        "wait_replicas must be a whole number from 0 to",
    ),
    (
        "wait_replicas -1",
        lambda: ts.ProducerSettings(wait_replicas=-1),
        ValueError,
        "wait_replicas",
    ),
    (
        "retry_for_s nan",
        lambda: ts.ProducerSettings(retry_for_s=math.nan),
        ValueError,
        "retry_for_s must be a finite",
    ),
    (
        "wait_timeout 0",
        lambda: ts.ProducerSettings(wait_timeout_s=0),
        ValueError,
        "WAIT 0 would block forever",
    ),
    (
        "default_max_retries -1",
        lambda: ts.ProducerSettings(default_max_retries=-1),
        ValueError,
        "default_max_retries",
    ),
    # limits
    (
        "rate float",
        lambda: ts.set_limits("t", rate=math.nan, client=DEAD),
        ValueError,
        "invalid rate nan: a string",
    ),
    (
        "rate huge",
        lambda: ts.set_limits("t", rate="99999999999/s", client=DEAD),
        ValueError,
        "at most 1e9 tasks",
    ),
    (
        "concurrency 1.5",
        lambda: ts.set_limits("t", concurrency=1.5, client=DEAD),
        ValueError,
        "invalid concurrency 1.5",
    ),
    (
        "concurrency '3'",
        lambda: ts.set_limits("t", concurrency="3", client=DEAD),
        ValueError,
        "invalid concurrency '3'",
    ),
    (
        "concurrency huge",
        lambda: ts.set_limits("t", concurrency=10**30, client=DEAD),
        ValueError,
        "from 1 to 1e9",
    ),
    (
        "burst nan",
        lambda: ts.set_limits("t", rate="1/s", burst=math.nan, client=DEAD),
        ValueError,
        "invalid burst nan",
    ),
    (
        "limits keys str",
        lambda: ts.set_limits("t", concurrency=1, client=DEAD, keys="ns"),
        TypeError,
        "keys must be a taskscale.keys.Keys",
    ),
    # schedules
    ("every huge", lambda: ts.schedule("n", "t", every=1e30), ValueError, "every must be at most"),
    ("cron int", lambda: ts.schedule("n", "t", cron=5), ValueError, "a string such as"),
    (
        "tz int",
        lambda: ts.schedule("n", "t", cron="* * * * *", tz=5),
        ValueError,
        "unknown time zone 5",
    ),
    (
        "schedule priority 1.5",
        lambda: ts.schedule("n", "t", every=5, priority=1.5),
        ValueError,
        "invalid priority 1.5",
    ),
    # registration
    ("register non-callable", lambda: ts.register("x", 5), TypeError, "5 is not a function"),
    (
        "register options dict",
        lambda: ts.register("x", print, {}),
        TypeError,
        "options must be a TaskOptions",
    ),
    ("task int name", lambda: ts.task(5), ValueError, "invalid task type 5"),
    # tracking
    ("track bad type", lambda: ts.track("a b"), ValueError, "invalid task type 'a b'"),
    (
        "tracker lease nan",
        lambda: ts.Tracker(DEAD, lease_s=math.nan),
        ValueError,
        "lease_s must be a finite number of seconds > 0",
    ),
    (
        "tracker heartbeat 0",
        lambda: ts.Tracker(DEAD, heartbeat_s=0),
        ValueError,
        "heartbeat_s must be a finite",
    ),
    ("tracker url", lambda: ts.Tracker("redis://h/0"), TypeError, "client must be a Redis client"),
    (
        "tracker start bad type",
        lambda: ts.Tracker(DEAD).start("a:b"),
        ValueError,
        "invalid task type 'a:b'",
    ),
    # the scheduler's settings (0 was a busy loop on Redis)
    (
        "scheduler lease 0",
        lambda: SchedulerSettings(lease_s=0),
        ValueError,
        "--lease must be a finite number of seconds > 0",
    ),
    (
        "scheduler sleep nan",
        lambda: SchedulerSettings(max_sleep_s=math.nan),
        ValueError,
        "--max-sleep",
    ),
    (
        "scheduler batch 0",
        lambda: SchedulerSettings(promote_batch=0),
        ValueError,
        "--batch must be a whole number",
    ),
]


@pytest.mark.parametrize(
    ("fn", "kind", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_wrong_values_are_one_sentence_naming_the_argument(
    fn: Callable[[], Any], kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind) as caught:
        fn()
    text = str(caught.value)
    assert message in text
    assert "\n" not in text
    assert not isinstance(caught.value, redis.RedisError)
