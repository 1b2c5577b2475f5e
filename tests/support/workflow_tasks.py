"""Test-only tasks for the workflow chaos test (imported by worker processes
as ``support.workflow_tasks``): small arithmetic whose results show that
each step got its parents' results, each run a few milliseconds long so
kills land mid-run.  Every run counts itself in a plain test hash (outside
the taskscale namespace) by task id: a step may run twice (its worker was
killed), its dependants are released once."""

from __future__ import annotations

import os
import random
import time

import redis

from taskscale.context import current_task
from taskscale.tasks import task

#: HASH task id -> runs (every start of a step, killed runs included).
RUNS = "test:wfchaos:runs"
#: The longest a run sleeps, seconds.
NAP_S = float(os.environ.get("WFCHAOS_NAP_S", "0.03"))

_client: redis.Redis | None = None


def _ran() -> None:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])
    _client.hincrby(RUNS, current_task().task_id, 1)
    time.sleep(random.uniform(0, NAP_S))


@task("wfc.inc")
def inc(x: int) -> int:
    _ran()
    return x + 1


@task("wfc.double")
def double(x: int) -> int:
    _ran()
    return 2 * x


@task("wfc.total")
def total(values: list[int]) -> int:
    _ran()
    return sum(values)
