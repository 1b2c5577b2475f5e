"""Test-only task of the mixed-fleet test, the Python half: ``mark`` records
each run's end in Redis, as tests/clients/node/fleet_tasks.js's does, so a
fleet of Python and TypeScript workers serves one type the same way.
Imported by worker subprocesses (``--import fleet_tasks``)."""

from __future__ import annotations

import os
import threading
import time

import redis

from taskscale.connection import connect
from taskscale.tasks import task

FINISHED = "fleet:finished"

_local = threading.local()


def _client() -> redis.Redis:
    if not hasattr(_local, "client"):
        _local.client = connect(os.environ["TASKSCALE_REDIS_URL"])
    client: redis.Redis = _local.client
    return client


@task("mark")
def mark(n: int, seconds: float) -> int:
    time.sleep(seconds)
    _client().rpush(FINISHED, f"{n}:py")
    return n
