"""The Celery app the integration tests run a real ``celery worker`` on.

Configured from the environment the test sets: ``TEST_CELERY_BROKER`` (a
database of the test's redis-server), ``TASKSCALE_REDIS_URL`` and
``TASKSCALE_NAMESPACE`` (where the hashes are kept), ``TEST_TRACK_LEASE``.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from celery import Celery

from taskscale.integrations.celery import install

app = Celery("taskscale_test", broker=os.environ["TEST_CELERY_BROKER"])
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
)


def by_queue(task: object) -> str | None:
    """``TEST_TYPE_BY_QUEUE=1``: count each run as its queue, and skip ``untracked``."""
    if getattr(task, "name", None) == "untracked":
        return None
    return str(task.request.delivery_info["routing_key"])  # type: ignore[attr-defined]


tracking = install(
    app,
    lease_s=float(os.environ.get("TEST_TRACK_LEASE", "30")),
    task_type=by_queue if os.environ.get("TEST_TYPE_BY_QUEUE") == "1" else None,
)
# socket_timeout: longer than the BLPOPs below (redis-py may default to less)
_redis = redis.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"], socket_timeout=120)


@app.task(name="block")
def block(key: str) -> None:
    """Run until the test pushes to ``key`` (at most 60 s)."""
    _redis.blpop([key], timeout=60)


@app.task(name="block_then_fail")
def block_then_fail(key: str) -> None:
    _redis.blpop([key], timeout=60)
    raise ValueError("failed on purpose")


@app.task(name="untracked")
def untracked(key: str) -> None:
    _redis.set("untracked-running", 1)
    _redis.blpop([key], timeout=60)


@app.task(name="retry_once", bind=True, max_retries=1)
def retry_once(self: Any, key: str) -> None:
    """The first run asks for a retry; the second returns."""
    if _redis.incr(key) == 1:
        raise self.retry(countdown=0)
