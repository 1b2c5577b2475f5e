"""Test-only tasks for the crash test: each run is recorded in Redis, at its
start and at its end, so the test can tell a re-run after a kill from a
duplicate.  Imported by worker subprocesses (``--import crash_tasks``)."""

from __future__ import annotations

import os
import threading
import time

import redis

from taskscale.connection import connect
from taskscale.tasks import task

STARTED = "crashtest:started"
FINISHED = "crashtest:finished"

_local = threading.local()


def _client() -> redis.Redis:
    if not hasattr(_local, "client"):
        _local.client = connect(os.environ["TASKSCALE_REDIS_URL"])
    client: redis.Redis = _local.client
    return client


@task("crashsleep")
def crashsleep(n: int, seconds: float) -> int:
    _client().rpush(STARTED, n)
    time.sleep(seconds)
    _client().rpush(FINISHED, n)
    return n
