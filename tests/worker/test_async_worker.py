"""Real ``taskscale worker`` processes running ``async def`` tasks: many at
once on one event loop, never more claimed than async slots, side by side
with thread tasks, a graceful SIGTERM, and the coroutines still running at
the grace end cancelled (they see it) with their tasks requeued at the head."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
import redis
from cancel_tasks import CANCELLED, STARTED

from support.counters import active, stat
from support.waiting import wait_until
from support.workers import example_worker, sigterm_twice, taskscale_process, worker_argv
from taskscale.keys import Keys
from taskscale.producer import Call, Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(60) == 0
    finally:
        proc.kill()
        proc.communicate()


def inflight(r: redis.Redis, keys: Keys) -> int:
    return sum(int(r.hlen(k)) for k in r.keys(keys.prefix + "inflight:*"))


def test_one_process_runs_thousands_of_async_tasks_at_once(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    total, seconds, threads = 2000, 0.5, 4
    producer.enqueue_many("async_sleep", [Call(kwargs={"seconds": seconds})] * total)
    proc = example_worker(
        redis_url, "async_sleep", "--threads", str(threads), "--async-slots", "500"
    )
    try:
        wait_until(lambda: active(r, keys, "async_sleep") > 0, timeout=30)
        started = time.monotonic()
        most = 0
        for _ in range(6000):  # bounded: 60 s of samples at most
            most = max(most, active(r, keys, "async_sleep"))
            if stat(r, keys, "async_sleep", "completed") == total:
                break
            time.sleep(0.01)
        took = time.monotonic() - started
        print(f"{total} x asyncio.sleep({seconds}) on 500 async slots: {took:.2f} s")
        assert stat(r, keys, "async_sleep", "completed") == total
        # Order of magnitude only: on threads it would take total*seconds/threads = 250 s.
        assert took < total * seconds / threads / 10
        assert most > 100  # hundreds ran at once, far more than there are threads
        assert active(r, keys, "async_sleep") == 0 and inflight(r, keys) == 0
    finally:
        stop(proc)
    assert r.llen(keys.queue("async_sleep")) == 0


def test_never_more_async_tasks_claimed_than_async_slots(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    slots = 5
    producer.enqueue_many("async_sleep", [Call(kwargs={"seconds": 60})] * 20)
    proc = example_worker(redis_url, "async_sleep", "--async-slots", str(slots), "--grace", "0")
    try:
        wait_until(lambda: active(r, keys, "async_sleep") == slots, timeout=30)
        samples = []
        for _ in range(40):  # 2 s of samples
            samples.append(
                (
                    active(r, keys, "async_sleep"),
                    inflight(r, keys),
                    r.llen(keys.queue("async_sleep")),
                )
            )
            time.sleep(0.05)
        assert max(s[0] for s in samples) == slots
        assert max(s[1] for s in samples) == slots
        assert min(s[2] for s in samples) == 20 - slots  # the rest stays queued in Redis
    finally:
        stop(proc)
    assert r.llen(keys.queue("async_sleep")) == 20 and active(r, keys, "async_sleep") == 0


def test_a_worker_runs_thread_and_async_tasks_at_once(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("sleep", [Call(kwargs={"seconds": 3})] * 4)
    producer.enqueue_many("async_sleep", [Call(kwargs={"seconds": 3})] * 10)
    proc = example_worker(
        redis_url, "sleep,async_sleep", "--threads", "2", "--async-slots", "8", "--grace", "30"
    )
    try:
        # both pools full at one instant: 2 threads and 8 async slots, no more
        wait_until(
            lambda: (active(r, keys, "sleep"), active(r, keys, "async_sleep")) == (2, 8),
            timeout=30,
        )
        wait_until(
            lambda: (
                stat(r, keys, "sleep", "completed") + stat(r, keys, "async_sleep", "completed")
                == 14
            ),
            timeout=60,
        )
    finally:
        stop(proc)
    assert active(r, keys, "sleep") == 0 and active(r, keys, "async_sleep") == 0


def test_sigterm_finishes_short_async_tasks_and_requeues_long_ones_at_the_head(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    long_ids = producer.enqueue_many("async_sleep", [Call(kwargs={"seconds": 120})] * 2)
    short_ids = producer.enqueue_many("async_sleep", [Call(kwargs={"seconds": 1})] * 3)
    waiting = producer.enqueue("async_sleep", seconds=0.1)
    proc = example_worker(redis_url, "async_sleep", "--async-slots", "5", "--grace", "4")
    try:
        wait_until(lambda: active(r, keys, "async_sleep") == 5, timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert stat(r, keys, "async_sleep", "completed") == 3, err.decode()[-2000:]
    queue = [json.loads(x)["id"] for x in r.lrange(keys.queue("async_sleep"), 0, -1)]
    assert sorted(queue[:2]) == sorted(long_ids) and queue[2:] == [waiting]
    assert not set(short_ids) & set(queue)
    assert active(r, keys, "async_sleep") == 0 and inflight(r, keys) == 0
    assert stat(r, keys, "async_sleep", "requeued") == 2
    assert stat(r, keys, "async_sleep", "failed") == 0 and r.llen(keys.dead("async_sleep")) == 0
    assert r.zcard(keys.workers) == 0


def test_a_second_sigterm_cancels_async_tasks_at_once(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    task_id = producer.enqueue("async_sleep", seconds=120)
    proc = example_worker(redis_url, "async_sleep", "--grace", "300")
    try:
        wait_until(lambda: active(r, keys, "async_sleep") == 1, timeout=30)
        assert sigterm_twice(proc) == 0  # long before the 300 s grace
    finally:
        proc.kill()
        proc.communicate()
    queue = [json.loads(x)["id"] for x in r.lrange(keys.queue("async_sleep"), 0, -1)]
    assert queue == [task_id]
    assert active(r, keys, "async_sleep") == 0 and inflight(r, keys) == 0
    assert stat(r, keys, "async_sleep", "failed") == 0


def test_each_of_several_processes_has_its_own_async_slots(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    proc = example_worker(redis_url, "async_sleep", "--processes", "2", "--async-slots", "100")
    try:
        wait_until(lambda: r.zcard(keys.workers) == 2, timeout=30)  # both up before the burst
        producer.enqueue_many("async_sleep", [Call(kwargs={"seconds": 1.0})] * 300)
        most = 0
        for _ in range(6000):  # bounded: 60 s of samples at most
            most = max(most, active(r, keys, "async_sleep"))
            if stat(r, keys, "async_sleep", "completed") == 300:
                break
            time.sleep(0.01)
        assert stat(r, keys, "async_sleep", "completed") == 300
        # More than one process's slots at once.  (No upper bound here: a freed
        # slot is claimed again before the reporter's complete.lua call lands, so
        # while tasks finish ACTIVE_TASKS may exceed the slots by the outcomes
        # in flight -- as with threads; the bound is tested with nothing finishing.)
        assert most > 100
        assert active(r, keys, "async_sleep") == 0
    finally:
        stop(proc)
    assert inflight(r, keys) == 0


def test_at_the_grace_end_running_coroutines_are_cancelled_and_their_tasks_requeued(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    """The coroutine sees the cancellation (its ``except CancelledError``
    runs, and may await), and its task goes back to the head of its queue
    with no failure recorded."""
    held = producer.enqueue_many("held", [Call(kwargs={"tag": t}) for t in "ab"])
    waiting = producer.enqueue("held", tag="waiting")
    argv = worker_argv("held", "cancel_tasks", async_slots=2, grace=1)
    proc = taskscale_process(redis_url, *argv, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: r.llen(STARTED) == 2, timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        proc.kill()
        _, err = proc.communicate()
    cancelled = sorted(x.decode() for x in r.lrange(CANCELLED, 0, -1))
    assert cancelled == sorted(held), err.decode()[-2000:]
    assert b"cancelled 2 async task(s) at the grace end" in err
    queue = [json.loads(x)["id"] for x in r.lrange(keys.queue("held"), 0, -1)]
    assert sorted(queue[:2]) == sorted(held) and queue[2:] == [waiting]
    assert stat(r, keys, "held", "requeued") == 2
    assert stat(r, keys, "held", "failed") == 0 and r.llen(keys.dead("held")) == 0
    assert active(r, keys, "held") == 0 and inflight(r, keys) == 0
