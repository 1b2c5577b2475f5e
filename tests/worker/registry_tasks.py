"""Test-only tasks for the worker registry tests (imported by worker processes)."""

from __future__ import annotations

import os
import time

import redis

from taskscale.tasks import task

#: A list the ``reg.gate`` tasks wait on: push one token per task to release.
GATE = "test:registry:gate"

_client: redis.Redis | None = None


def client() -> redis.Redis:
    global _client
    if _client is None:
        # redis-py 8 gives a client a 5 s socket timeout: shorter than the gate may wait
        _client = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"], socket_timeout=90)
    return _client


@task("reg.gate")
def gate() -> bool:
    """Hold a thread until the test opens the gate (at most 60 s)."""
    return client().blpop([GATE], timeout=60) is not None


@task("reg.work")
def work(*, fail: bool = False) -> str:
    """Take at least 50 ms; fail if told to."""
    time.sleep(0.05)
    if fail:
        raise RuntimeError("failed on purpose")
    return "done"
