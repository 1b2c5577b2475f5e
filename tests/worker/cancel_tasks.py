"""Test-only async task for the grace-end cancellation test: ``held(tag)``
records its start, awaits for a long time, and, when cancelled, records that
from its ``except asyncio.CancelledError`` block (with an ``await``, as real
cleanup would) before letting the cancellation through.  Imported by worker
subprocesses (``--import cancel_tasks``)."""

from __future__ import annotations

import asyncio
import os

import redis.asyncio

from taskscale.context import current_task
from taskscale.tasks import task

STARTED = "canceltest:started"  # list of the task ids that started
CANCELLED = "canceltest:cancelled"  # list of the task ids that saw their cancellation
#: The longest a run waits (far beyond any grace period a test gives).
HOLD_S = 300.0


@task("held")
async def held(tag: str = "") -> str:
    task_id = current_task().task_id
    client = redis.asyncio.Redis.from_url(os.environ["TASKSCALE_REDIS_URL"])
    try:
        await client.rpush(STARTED, task_id)
        await asyncio.sleep(HOLD_S)
        return tag
    except asyncio.CancelledError:
        await client.rpush(CANCELLED, task_id)
        raise
    finally:
        await client.aclose()
