"""A worker's parts share one set of things (taskscale.worker.shared.Shared):
what one part counts, queues or signals, the others see."""

from __future__ import annotations

import time

import pytest
import redis

from taskscale.keys import Keys
from taskscale.tasks import registry as examples_registry
from taskscale.worker import Worker, WorkerSettings

pytestmark = pytest.mark.integration


def a_worker(redis_url: str, keys: Keys) -> Worker:
    return Worker(
        redis.Redis.from_url(redis_url),
        WorkerSettings(
            types=("noop", "async_echo"),
            threads=2,
            async_slots=3,
            worker_id="w-wired",
            pod="pod-a",
            grace_s=30,
        ),
        keys=keys,
        registry=examples_registry,
    )


def test_what_the_claimer_counts_the_worker_and_its_registry_record_show(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    worker = a_worker(redis_url, keys)
    worker._claimer._tally.claimed(["t1", "t2"], "sync")
    assert worker.busy == 2
    worker._reporter.heartbeat()
    record = r.hgetall(keys.worker("w-wired"))
    assert (record[b"id"], record[b"pod"]) == (b"w-wired", b"pod-a")
    assert (record[b"busy"], record[b"threads"]) == (b"2", b"5")  # 2 threads + 3 async slots


def test_what_an_executor_reports_reaches_the_reporter(redis_url: str, keys: Keys) -> None:
    worker = a_worker(redis_url, keys)
    outcome = object()
    worker._async._report(outcome)  # type: ignore[arg-type]  # the event loop's report
    assert worker._reporter.outbox.get_nowait() is outcome


def test_stop_requests_reach_every_part(redis_url: str, keys: Keys) -> None:
    worker = a_worker(redis_url, keys)
    worker._claimer._tally.claimed(["t1"], "sync")  # a running task: the drain would wait
    worker.request_stop()
    assert worker._claimer._stopping.is_set() and worker._reporter._stopping.is_set()
    assert not worker._shutdown._forced.is_set()
    worker.request_stop()  # the second one cuts the 30 s grace period short
    started = time.monotonic()
    worker._shutdown.drain()
    assert time.monotonic() - started < 5.0


def test_a_fatal_error_in_a_part_stops_the_worker_with_exit_code_1(
    redis_url: str, keys: Keys
) -> None:
    worker = a_worker(redis_url, keys)
    worker._claimer._on_fatal(redis.ResponseError("WRONGTYPE"))
    assert worker._exit_code == 1
    assert worker._reporter._stopping.is_set()
