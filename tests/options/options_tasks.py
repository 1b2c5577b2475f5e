"""Test-only tasks for the task-option tests (imported by worker processes).

Each run records itself in plain test keys (outside the taskscale
namespace) with the Redis clock, so the tests can count attempts and measure
the gaps between them.
"""

from __future__ import annotations

import os
import time

import redis

from taskscale.tasks import task

#: LIST of "<unix seconds with microseconds>" per attempt of a tagged run.
ATTEMPTS = "test:options:{tag}:attempts"
#: LIST of events ("started", "finished", "cleanup", "done") of a tagged run.
EVENTS = "test:options:{tag}:events"

_client: redis.Redis | None = None


def client() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])
    return _client


def _now() -> str:
    seconds, micros = client().time()
    return f"{seconds}.{micros:06d}"


@task("opt.flaky", max_retries=0)
def flaky(tag: str) -> None:
    """Always fails; by its decorator it is never retried."""
    client().rpush(ATTEMPTS.format(tag=tag), _now())
    raise ValueError("flaky fails every attempt")


@task("opt.slow", timeout=1.0, max_retries=0)
def slow(tag: str, seconds: float = 30.0) -> str:
    """Python code that runs ``seconds``: a loop of short sleeps (interruptible)."""
    events = EVENTS.format(tag=tag)
    client().rpush(events, "started")
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
        client().rpush(events, "finished")
    finally:
        client().rpush(events, "cleanup")
    return "ran to the end"


@task("opt.blocking", timeout=0.5, max_retries=0)
def blocking(tag: str, seconds: float) -> str:
    """One blocking C call (``time.sleep``): not interruptible."""
    client().rpush(ATTEMPTS.format(tag=tag), _now())
    time.sleep(seconds)
    return "slept"


@task("opt.quick")
def quick(tag: str) -> str:
    client().rpush(EVENTS.format(tag=tag), "done")
    return "quick"


@task("opt.answer", result_ttl=2)
def answer(x: int) -> int:
    return x
