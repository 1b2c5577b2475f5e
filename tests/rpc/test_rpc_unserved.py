"""An RPC nobody answers says why, on a real Redis with real workers: no live
worker serves the type (the task stays queued, as a Celery result timeout
leaves it), the workers are busy, the task is running, or it waits as a
retry with no scheduler alive; and ``require_worker=True`` fails fast,
enqueueing nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
import rpc_tasks

from support.waiting import wait_until
from support.workers import running_worker
from taskscale.keys import Keys
from taskscale.rpc import CallOptions, NoLiveWorker, TaskTimeout, call, call_async
from taskscale.worker import RetryPolicy, Worker

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")


@contextmanager
def worker_thread(url: str, types: tuple[str, ...], threads: int = 1) -> Iterator[Worker]:
    """A worker in a thread of this process, registered before it is yielded."""
    client = redis.Redis.from_url(url)
    with running_worker(
        url, types, threads=threads, keys=KEYS, grace_s=5.0, retry=RetryPolicy()
    ) as worker:
        try:
            rpc_tasks.RELEASE.clear()
            wait_until(lambda: client.zscore(KEYS.workers, worker.id) is not None, timeout=10)
            yield worker
        finally:
            rpc_tasks.RELEASE.set()
            client.close()


def test_a_call_no_live_worker_serves_times_out_saying_so_and_stays_queued(
    redis_url: str, r: redis.Redis
) -> None:
    with worker_thread(redis_url, ("rpc.where",)), pytest.raises(TaskTimeout) as caught:
        call(r, "rpc.add", 1, 2, keys=KEYS, timeout=0.5)
    message = str(caught.value)
    assert "no live worker serves 'rpc.add'" in caught.value.cause
    assert message.endswith(caught.value.cause)
    assert f"taskscale cancel {caught.value.task_id}" in message
    assert r.llen(KEYS.queue("rpc.add")) == 1  # still there for a worker to come


def test_a_call_behind_busy_workers_says_they_are_busy(redis_url: str, r: redis.Redis) -> None:
    with worker_thread(redis_url, ("rpc.block", "rpc.add")):
        blocker = call_async(r, "rpc.block", keys=KEYS)
        wait_until(lambda: r.hget(KEYS.active, "rpc.block") == b"1", timeout=10)
        with pytest.raises(TaskTimeout) as caught:
            call(r, "rpc.add", 1, 2, keys=KEYS, timeout=1.0)
        assert "still queued: 1 live worker serve 'rpc.add'" in caught.value.cause
        rpc_tasks.RELEASE.set()
        assert blocker.get(timeout=30) == "released"


def test_a_call_still_running_names_its_worker(redis_url: str, r: redis.Redis) -> None:
    with worker_thread(redis_url, ("rpc.block",)) as worker:
        with pytest.raises(TaskTimeout) as caught:
            call(r, "rpc.block", keys=KEYS, timeout=3.0)
        assert caught.value.cause == f"the task is still running, on worker {worker.id}"


def test_a_retry_with_no_scheduler_alive_says_a_scheduler_must_run(
    redis_url: str, r: redis.Redis
) -> None:
    with worker_thread(redis_url, ("rpc.flaky",)), pytest.raises(TaskTimeout) as caught:
        call(r, "rpc.flaky", keys=KEYS, timeout=3.0, options=CallOptions(max_retries=3))
    assert "delayed retry" in caught.value.cause
    assert "no scheduler is alive" in caught.value.cause


def test_require_worker_fails_fast_and_enqueues_nothing(redis_url: str, r: redis.Redis) -> None:
    strict = CallOptions(require_worker=True)
    with pytest.raises(NoLiveWorker) as caught:
        call(r, "rpc.add", 1, 2, keys=KEYS, timeout=30, options=strict)
    assert caught.value.task_type == "rpc.add"
    assert "not enqueued" in str(caught.value)
    assert r.llen(KEYS.queue("rpc.add")) == 0
    assert not r.sismember(KEYS.types, "rpc.add")
    with worker_thread(redis_url, ("rpc.add",)):
        assert call(r, "rpc.add", 1, 2, keys=KEYS, timeout=30, options=strict) == 3
