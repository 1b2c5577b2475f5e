"""Test-only task for the multi-process tests: ``gated(n)`` records its start,
waits (bounded) until the test opens the gate, then counts one run of task
``n``.  A run cut short by a kill never counts, so "every task counted
exactly once" means nothing was lost and nothing ran twice to the end.
Imported by worker subprocesses (``--import gate_tasks``)."""

from __future__ import annotations

import os
import threading
import time

import redis

from taskscale.connection import connect
from taskscale.tasks import task

GATE = "gatetest:open"
STARTED = "gatetest:started"  # hash n -> starts
FINISHED = "gatetest:finished"  # hash n -> finished runs
#: The longest a task waits for the gate (a test that forgets to open it).
MAX_WAIT_S = 120.0

_local = threading.local()


def _client() -> redis.Redis:
    if not hasattr(_local, "client"):
        _local.client = connect(os.environ["TASKSCALE_REDIS_URL"])
    client: redis.Redis = _local.client
    return client


@task("gated")
def gated(n: int) -> int:
    client = _client()
    client.hincrby(STARTED, str(n), 1)
    deadline = time.monotonic() + MAX_WAIT_S
    while not client.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.hincrby(FINISHED, str(n), 1)
    return n
