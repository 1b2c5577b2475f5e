"""Test-only task of the failover tests: each run appends its number to a list
on a *separate* plain Redis (TASKSCALE_TEST_RECORD_URL), so the record
survives the failover it is measuring.  Imported by worker subprocesses."""

from __future__ import annotations

import os
import threading

import redis

from taskscale.tasks import task

_local = threading.local()


@task("fo")
def record(n: int) -> int:
    if not hasattr(_local, "client"):
        _local.client = redis.Redis.from_url(os.environ["TASKSCALE_TEST_RECORD_URL"])
    _local.client.rpush(os.environ["TASKSCALE_TEST_RECORD_KEY"], n)
    return n
