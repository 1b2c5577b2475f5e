"""A real ``celery worker`` (threads pool) keeps ACTIVE_TASKS / IDLE_SINCE
through taskscale.integrations.celery: exact while tasks run, 0 after, never
negative, failures count down, a SIGKILLed worker is reaped by a live one."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from library_workers import broker_url, celery_worker

from support.counters import active, stat
from support.waiting import wait_until
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.types import TypeObservation
from taskscale.keys import Keys

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


@pytest.fixture
def producer(redis_url: str) -> Iterator[Celery]:
    """A plain app that only sends (the tracking is installed in the worker's)."""
    app = Celery("producer", broker=broker_url(redis_url))
    yield app
    app.close()


def observed(r: redis.Redis, keys: Keys, task_type: str) -> TypeObservation:
    """The type as the controller's observer reads it."""
    request = ObserveRequest(types=(task_type,), lead_s=0)
    return Observer(r, keys).observe({"s": request})["s"].types[task_type]


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1e6


def test_running_tasks_are_counted_exactly_and_idle_since_is_stamped(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Celery, tmp_path: Path
) -> None:
    with celery_worker(redis_url=redis_url, keys=keys, log=tmp_path / "w.log", queue="q") as w:
        w.start(r)
        for _ in range(6):  # 4 threads: 4 run, 2 wait in the worker
            producer.send_task("block", args=["release"], queue="q")
        wait_until(lambda: active(r, keys, "block") == 4, timeout=30)
        time.sleep(1.0)  # and no more than the 4 that run
        assert active(r, keys, "block") == 4
        assert r.hget(keys.idle_since, "block") is None
        assert observed(r, keys, "block").active == 4  # what the controller reads
        r.rpush("release", *["go"] * 6)
        wait_until(lambda: stat(r, keys, "block", "completed") == 6, timeout=30)
        assert active(r, keys, "block") == 0
        idle = float(r.hget(keys.idle_since, "block") or 0)
        assert redis_now(r) - 30 < idle <= redis_now(r)
        seen = observed(r, keys, "block")
        assert (seen.active, seen.idle_since) == (0, idle)
        assert stat(r, keys, "block", "claimed") == 6
        assert stat(r, keys, "block", "active_underflow") == 0
        assert w.stop() == 0
    # a warm shutdown leaves: its lease record is gone
    assert r.zcard(keys.tracked_processes) == 0


def test_a_failing_task_counts_down_as_failed(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Celery, tmp_path: Path
) -> None:
    with celery_worker(redis_url=redis_url, keys=keys, log=tmp_path / "w.log", queue="q") as w:
        w.start(r)
        producer.send_task("block_then_fail", args=["release"], queue="q")
        producer.send_task("block_then_fail", args=["release"], queue="q")
        wait_until(lambda: active(r, keys, "block_then_fail") == 2, timeout=30)
        r.rpush("release", "go", "go")
        wait_until(lambda: stat(r, keys, "block_then_fail", "failed") == 2, timeout=30)
        assert active(r, keys, "block_then_fail") == 0
        assert stat(r, keys, "block_then_fail", "completed") == 0
        assert r.hget(keys.idle_since, "block_then_fail") is not None


def test_a_killed_workers_tasks_are_counted_down_by_a_live_worker(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Celery, tmp_path: Path
) -> None:
    lease = 2.0
    killed = celery_worker(
        redis_url=redis_url, keys=keys, log=tmp_path / "a.log", queue="a", lease_s=lease
    )
    survivor = celery_worker(
        redis_url=redis_url, keys=keys, log=tmp_path / "b.log", queue="b", lease_s=lease
    )
    with killed, survivor:
        killed.start(r)
        for _ in range(3):
            producer.send_task("block", args=["never"], queue="a")
        wait_until(lambda: active(r, keys, "block") == 3, timeout=30)
        assert killed.stop(signal.SIGKILL) == -signal.SIGKILL
        time.sleep(lease + 1)
        assert active(r, keys, "block") == 3  # nobody alive to reap: still counted
        survivor.start(r)  # an idle worker joins (as a replacement pod would) ...
        wait_until(lambda: active(r, keys, "block") == 0, timeout=30)  # ... and reaps
        assert r.hget(keys.idle_since, "block") is not None
        assert r.zcard(keys.tracked_processes) == 1  # only the survivor's lease
        assert stat(r, keys, "block", "active_underflow") == 0


def test_the_prefork_pool_counts_in_each_child_and_a_killed_child_is_reaped(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Celery, tmp_path: Path
) -> None:
    lease = 2.0
    with celery_worker(
        redis_url=redis_url,
        keys=keys,
        log=tmp_path / "w.log",
        queue="q",
        concurrency=2,
        lease_s=lease,
        pool="prefork",
    ) as w:
        w.start(r)
        producer.send_task("block", args=["release"], queue="q")
        producer.send_task("block", args=["release"], queue="q")
        wait_until(lambda: active(r, keys, "block") == 2, timeout=30)
        # the main process and each busy child hold a lease of their own
        wait_until(lambda: r.zcard(keys.tracked_processes) == 3, timeout=10)
        children = w.children()
        assert len(children) == 2
        os.kill(children[0], signal.SIGKILL)  # as a hard time limit would
        # the main process's heartbeat reaps the child within its lease
        wait_until(lambda: active(r, keys, "block") == 1, timeout=30)
        time.sleep(1.0)
        assert active(r, keys, "block") == 1  # the other child still runs its task
        r.rpush("release", "go")
        wait_until(lambda: stat(r, keys, "block", "completed") == 1, timeout=30)
        assert active(r, keys, "block") == 0
        assert stat(r, keys, "block", "active_underflow") == 0
        assert w.stop() == 0
    assert r.zcard(keys.tracked_processes) == 0  # children and main process left


def test_a_retried_run_counts_down_and_the_retry_counts_again(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Celery, tmp_path: Path
) -> None:
    with celery_worker(redis_url=redis_url, keys=keys, log=tmp_path / "w.log", queue="q") as w:
        w.start(r)
        producer.send_task("retry_once", args=["attempts"], queue="q")
        # the retry (countdown 0) may run and finish on another thread before
        # the first run's postrun: wait for both runs to be counted down
        wait_until(
            lambda: (
                stat(r, keys, "retry_once", "completed") == 1
                and stat(r, keys, "retry_once", "failed") == 1
            ),  # the run that asked for a retry
            timeout=30,
        )
        assert int(r.get("attempts") or 0) == 2
        assert stat(r, keys, "retry_once", "claimed") == 2
        assert active(r, keys, "retry_once") == 0


def test_a_mapping_function_chooses_the_type_or_skips_the_task(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Celery, tmp_path: Path
) -> None:
    w = celery_worker(redis_url=redis_url, keys=keys, log=tmp_path / "w.log", queue="emails")
    w.env["TEST_TYPE_BY_QUEUE"] = "1"
    with w:
        w.start(r)
        producer.send_task("block", args=["release"], queue="emails")
        producer.send_task("untracked", args=["release"], queue="emails")
        wait_until(lambda: active(r, keys, "emails") == 1, timeout=30)
        wait_until(lambda: r.exists("untracked-running"), timeout=30)  # both run ...
        assert r.hgetall(keys.active) == {b"emails": b"1"}  # ... one is counted
        r.rpush("release", "go", "go")
        wait_until(lambda: stat(r, keys, "emails", "completed") == 1, timeout=30)
        assert active(r, keys, "emails") == 0
        assert not r.exists(keys.stats("untracked"))
