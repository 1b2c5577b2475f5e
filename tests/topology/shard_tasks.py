"""Test-only tasks spread over shards: each run appends ``type:n`` to one list,
so the test can count runs per task.  Imported by worker subprocesses."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from taskscale.connection import connect
from taskscale.redis_urls import RedisClient
from taskscale.tasks import registry

#: The task types of the sharding tests (spread over namespaces by CRC-32).
TYPES = tuple(f"shard{i}" for i in range(12))
DONE = "shardtest:done"

_local = threading.local()


def _client() -> RedisClient:
    if not hasattr(_local, "client"):
        _local.client = connect(os.environ["TASKSCALE_REDIS_URL"])
    client: RedisClient = _local.client
    return client


def _recorder(task_type: str) -> Callable[[int], int]:
    def record(n: int) -> int:
        _client().rpush(DONE, f"{task_type}:{n}")
        return n

    return record


for _name in TYPES:
    registry.register(_name, _recorder(_name))
