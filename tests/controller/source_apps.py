"""A Celery app and RQ job functions for the observer-source tests.

Imported by the tests and by the Celery/RQ worker processes they start
(``PYTHONPATH`` includes this folder), so both sides agree on task names and
queues.  The broker is ``SOURCES_REDIS_URL``; a task that must keep running
until the test lets it go waits on a Redis list (BLPOP, bounded).
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

REDIS_URL = os.environ.get("SOURCES_REDIS_URL", "redis://127.0.0.1:6379/0")
#: Celery queue and task names the tests scale on.
QUEUE = "mail"
LONG_TASK = "source_apps.long"
QUICK_TASK = "source_apps.quick"


def make_app(broker_url: str) -> Celery:
    """The Celery app on ``broker_url``: priority lists on, one message prefetched."""
    celery = Celery("source_apps", broker=broker_url)
    celery.conf.update(
        broker_transport_options={
            "queue_order_strategy": "priority",
            "priority_steps": list(range(10)),
        },
        task_default_queue=QUEUE,
        # one message per worker, acknowledged after the run: a running task is
        # both unacked and in ACTIVE_TASKS (the observer must count it once)
        worker_prefetch_multiplier=1,
        task_acks_late=True,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
    )
    return celery


app = make_app(REDIS_URL)
if os.environ.get("SOURCES_TRACKING") == "1":  # the worker processes the tests start
    from taskscale.integrations.celery import install

    install(app, redis_url=REDIS_URL, namespace=os.environ.get("SOURCES_NAMESPACE", "taskscale"))


def wait_for_release(key: str, timeout_s: float = 60.0) -> bool:
    """Block until the test pushes to ``key`` (True) or ``timeout_s`` passes."""
    client = redis.Redis.from_url(REDIS_URL)
    deadline = time.monotonic() + timeout_s
    try:
        # short BLPOPs: one longer than the client's socket timeout would fail
        while time.monotonic() < deadline:
            if client.blpop([key], timeout=1) is not None:
                return True
        return False
    finally:
        client.close()


@app.task(name=LONG_TASK)
def long(key: str) -> bool:
    """Runs until the test releases ``key``; ``<key>:pod`` says which worker
    (``POD_NAME``) runs it, ``<key>:ended`` that it ran to its end."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.set(f"{key}:pod", os.environ.get("POD_NAME", ""))
        released = wait_for_release(key)
        client.set(f"{key}:ended", int(released))
        return released
    finally:
        client.close()


@app.task(name=QUICK_TASK)
def quick() -> int:
    return 1


def rq_block(key: str) -> bool:
    """An RQ job that runs until the test releases ``key``."""
    return wait_for_release(key)
