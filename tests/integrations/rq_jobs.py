"""The jobs the integration tests run on a real ``rq worker``, and a worker
class keyed by queue.  The jobs wait on keys of ``TEST_JOBS_REDIS_URL``."""

from __future__ import annotations

import os

import redis

from taskscale.integrations.rq import worker_class

# socket_timeout: longer than the BLPOPs below (redis-py may default to less)
_redis = redis.Redis.from_url(os.environ["TEST_JOBS_REDIS_URL"], socket_timeout=120)

#: ``rq worker -w rq_jobs.ByQueueWorker``: each job counts as its queue's type.
ByQueueWorker = worker_class(task_type="queue")


def block(key: str) -> None:
    """Run until the test pushes to ``key`` (at most 60 s)."""
    _redis.blpop([key], timeout=60)


def block_then_fail(key: str) -> None:
    _redis.blpop([key], timeout=60)
    raise ValueError("failed on purpose")
