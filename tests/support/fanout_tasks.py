"""Test-only tasks for the fan-out tests and the unique-task crash test
(imported by worker processes as ``support.fanout_tasks``).

They observe the concurrency limit from *inside* the task bodies, where it
matters: each run INCRs a shared Redis counter on start, raises a running
maximum (``ZADD GT``, atomic) and DECRs on the way out. The keys are plain
test keys, outside the taskscale namespace.
"""

from __future__ import annotations

import os
import time

import redis

from taskscale.tasks import task

#: Test keys; ``tag`` (one per test) keeps tests apart.
RUNNING = "test:fanout:{tag}:running"
MAX_SEEN = "test:fanout:{tag}:max"
STARTS = "test:fanout:{tag}:starts"
FINISHED = "test:fanout:{tag}:finished"
#: Set in a worker's environment to make every tracked run hang (to be killed).
HANG_ENV = "FANOUT_TEST_HANG"

_client: redis.Redis | None = None


def client() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])
    return _client


@task("fo.track")
def track(i: int, *, tag: str, sleep_s: float = 0.02, fail_first: bool = False) -> int:
    """Count itself as running while it sleeps; optionally fail its first attempt."""
    r = client()
    starts = r.hincrby(STARTS.format(tag=tag), str(i), 1)
    running = r.incr(RUNNING.format(tag=tag))
    try:
        r.zadd(MAX_SEEN.format(tag=tag), {"max": running}, gt=True)
        if os.environ.get(HANG_ENV) == "1":
            time.sleep(600)  # SIGKILLed here by the test
        time.sleep(sleep_s)
    finally:
        r.decr(RUNNING.format(tag=tag))
    if fail_first and starts == 1:
        raise ValueError(f"sub-task {i} fails its first attempt")
    r.rpush(FINISHED.format(tag=tag), f"{i}:{os.getpid()}")
    return i


@task("fo.square")
def square(i: int, *, tag: str, sleep_s: float = 0.05, fail: bool = False, pad: int = 0) -> object:
    """``i * i`` (or ``[i * i, "x" * pad]``), counted as running like ``fo.track``;
    ``fail`` raises instead. Records ``i`` in FINISHED when it ends either way."""
    r = client()
    running = r.incr(RUNNING.format(tag=tag))
    try:
        r.zadd(MAX_SEEN.format(tag=tag), {"max": running}, gt=True)
        time.sleep(sleep_s)
    finally:
        r.decr(RUNNING.format(tag=tag))
        r.rpush(FINISHED.format(tag=tag), f"{i}:{os.getpid()}")
    if fail:
        raise ValueError(f"sub-task {i} was told to fail")
    return [i * i, "x" * pad] if pad else i * i


@task("fo.always_fail")
def always_fail(i: int) -> None:
    raise ValueError(f"sub-task {i} always fails")


@task("fo.peek")
def peek(fanout_key: str) -> int:
    """How many sub-tasks of a fan-out had succeeded when this task ran."""
    return int(client().hget(fanout_key, "succeeded") or 0)
