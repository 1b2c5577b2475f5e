"""The counters the runtime keeps in Redis (docs/schema.md), read back by the
tests: a type's running tasks (ACTIVE_TASKS) and its per-type statistics."""

from __future__ import annotations

import redis

from taskscale.keys import Keys


def active(r: redis.Redis, keys: Keys, task_type: str) -> int:
    """How many tasks of ``task_type`` run now (ACTIVE_TASKS)."""
    return int(r.hget(keys.active, task_type) or 0)


def stat(r: redis.Redis, keys: Keys, task_type: str, name: str) -> int:
    """One per-type statistic (``completed``, ``failed``, ``requeued``, ...)."""
    return int(r.hget(keys.stats(task_type), name) or 0)


def queued_and_lengths(r: redis.Redis, keys: Keys, task_type: str) -> tuple[int, int]:
    """QUEUED[task_type] and the length of its ready lists, read in one MULTI
    (one instant: no script runs between them)."""
    pipe = r.pipeline(transaction=True)
    pipe.hget(keys.queued, task_type)
    for q in keys.queues(task_type):
        pipe.llen(q)
    counted, *lengths = pipe.execute()
    return int(counted or 0), sum(lengths)
