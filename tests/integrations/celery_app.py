"""The Celery app the integration tests run a real ``celery worker`` on.

Configured from the environment the test sets: ``TEST_CELERY_BROKER`` (a
database of the test's redis-server), ``TASKSCALE_REDIS_URL`` and
``TASKSCALE_NAMESPACE`` (where the hashes are kept), ``TEST_TRACK_LEASE``.
"""

from __future__ import annotations

import os

import redis
from celery import Celery

from taskscale.integrations.celery import install

app = Celery("taskscale_test", broker=os.environ["TEST_CELERY_BROKER"])
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
)
tracking = install(app, lease_s=float(os.environ.get("TEST_TRACK_LEASE", "30")))
_redis = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])


@app.task(name="block")
def block(key: str) -> None:
    """Run until the test pushes to ``key`` (at most 60 s)."""
    _redis.blpop([key], timeout=60)


@app.task(name="block_then_fail")
def block_then_fail(key: str) -> None:
    _redis.blpop([key], timeout=60)
    raise ValueError("failed on purpose")
