"""Test-only task for the Job-mode burst on the local node: ``jobsleep(n, s)``
records its start and end per task number in Redis, and which pod ran it,
so the test can tell a rerun or a duplicate from a single run.  Imported by
the Job pods' workers (``--import jobburst_tasks``)."""

from __future__ import annotations

import os
import time

from taskscale.connection import connect
from taskscale.tasks import task

STARTED = "jobburst:started"  # hash n -> starts
FINISHED = "jobburst:finished"  # hash n -> finished runs
PODS = "jobburst:pods"  # hash n -> the pod that ran it


@task("jobsleep")
def jobsleep(n: int, seconds: float) -> int:
    client = connect(os.environ["TASKSCALE_REDIS_URL"])
    client.hincrby(STARTED, str(n), 1)
    client.hset(PODS, str(n), os.environ.get("POD_NAME", "?"))
    time.sleep(seconds)
    client.hincrby(FINISHED, str(n), 1)
    client.close()
    return n
