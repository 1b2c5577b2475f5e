"""Test-only tasks for the tracing tests (imported by the worker processes):
one that fails its first run, then enqueues a sub-task and fans out two."""

from __future__ import annotations

import taskscale
from taskscale.context import current_task
from taskscale.fanout import submit_fanout
from taskscale.producer import Producer
from taskscale.tasks import task


@task("tracing.flaky", max_retries=2, retry_backoff=0.05)
def flaky(n: int) -> dict[str, int]:
    attempt = current_task().attempt
    if attempt == 1:
        raise RuntimeError("first run fails")
    taskscale.enqueue("tracing.leaf", n)
    submit_fanout(None, "tracing.leaf", [[n], [n]], limit=2)
    return {"n": n, "attempt": attempt}


@task("tracing.leaf")
def leaf(n: int) -> int:
    return n


@task("tracing.parent")
def parent(n: int, url: str) -> int:
    """Enqueues one sub-task (whose envelope carries this run's context)."""
    Producer(url).enqueue("tracing.leaf", n)
    return n


@task("tracing.async_parent")
async def async_parent(n: int, url: str) -> int:
    """:func:`parent` as an ``async def`` task (the async executor's path)."""
    Producer(url).enqueue("tracing.leaf", n)
    return n
