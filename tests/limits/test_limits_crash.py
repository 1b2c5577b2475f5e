"""Crash test of flow control: workers SIGKILLed while tasks of a capped type
that are also unique run.  The dead workers' slots of the cap and their unique
keys come back once the reaper returns their tasks; nothing is lost."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time

import pytest
import redis
from limits_tasks import FINISHED, PEAKS, RUNNING

from support.counters import queued_and_lengths
from support.waiting import wait_until
from support.workers import live_pids, taskscale_process, worker_argv
from taskscale.keys import Keys
from taskscale.limits import set_limits
from taskscale.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASKS = 60
CAP = 3
#: Fewer than the worker's --max-lost (5): while the cap is full of a killed
#: worker's tasks nothing else runs, so the next kill tends to catch the same
#: tasks again, and a 5th would dead-letter them (LostWorker) by design.
KILLS = 4


def capped_worker(url: str) -> subprocess.Popen[bytes]:
    argv = worker_argv(
        "limcap",
        "limits_tasks",
        threads=4,
        lease=1.5,
        heartbeat=0.3,
        idle_wait=0.5,
        grace=20,
        log_level="WARNING",
    )
    return taskscale_process(url, *argv, stderr=subprocess.DEVNULL)


def enqueue_all(producer: Producer) -> list[str]:
    return [
        producer.enqueue("limcap", i, 0.4, unique_key=f"limjob:{i}", max_retries=0)
        for i in range(TASKS)
    ]


def test_killed_workers_give_back_cap_slots_and_unique_keys(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    rng = random.Random(11)
    set_limits("limcap", concurrency=CAP, client=r, keys=keys)
    first_ids = enqueue_all(producer)
    active_seen: list[int] = []
    sampling = threading.Event()

    def sample_active() -> None:
        sampler = redis.Redis.from_url(redis_url)
        deadline = time.monotonic() + 120
        while not sampling.is_set() and time.monotonic() < deadline:
            active_seen.append(int(sampler.hget(keys.active, "limcap") or 0))
            time.sleep(0.005)
        sampler.close()

    schedulers = [
        taskscale_process(redis_url, "scheduler", "--lease", "1.5", "--log-level", "WARNING")
        for _ in range(2)
    ]
    workers = [capped_worker(redis_url) for _ in range(3)]
    sampler = threading.Thread(target=sample_active, daemon=True)
    sampler.start()
    kills = caught = 0
    try:
        deadline = time.monotonic() + 40
        while kills < KILLS and time.monotonic() < deadline:
            time.sleep(0.8)
            live = live_pids(r, keys)
            busy = [
                i
                for i, proc in enumerate(workers)
                if proc.pid in live and r.hlen(keys.inflight(_worker_id(r, keys, proc.pid)))
            ]
            if not busy:
                continue
            victim = workers.pop(rng.choice(busy))
            # Frozen first, so no task of it finishes between the count and
            # the kill; a script it sent just before has 50 ms to run.
            victim.send_signal(signal.SIGSTOP)
            time.sleep(0.05)
            caught += r.hlen(keys.inflight(_worker_id(r, keys, victim.pid)))
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            workers.append(capped_worker(redis_url))

        def finished_all() -> bool:
            return len(set(r.lrange(FINISHED + "limcap", 0, -1))) == TASKS

        wait_until(finished_all, timeout=90, interval=0.2)
        wait_until(lambda: int(r.hget(keys.active, "limcap") or 0) == 0, timeout=30)
        assert not list(r.scan_iter(match=keys.prefix + "unique:*"))  # every key released
        wait_until(lambda: {p.pid for p in workers} == live_pids(r, keys), timeout=30)

        # The slots came back: a second round runs CAP at a time again, and
        # the same unique keys are free to take (the inside counter is reset:
        # a killed run never decremented it).
        r.delete(RUNNING + "limcap", PEAKS + "limcap", FINISHED + "limcap")
        second_ids = enqueue_all(producer)
        assert not set(second_ids) & set(first_ids)
        wait_until(finished_all, timeout=90, interval=0.2)
        peaks = [int(x) for x in r.lrange(PEAKS + "limcap", 0, -1)]
        for proc in workers + schedulers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(30) for proc in workers + schedulers]
    finally:
        sampling.set()
        for proc in workers + schedulers:
            proc.kill()
            proc.wait(10)
    sampler.join(10)

    assert kills == KILLS and caught > 0 and codes == [0] * len(codes)
    assert max(active_seen) == CAP  # the cap was reached and never exceeded, kills or not
    assert len(peaks) == TASKS and max(peaks) == CAP
    stats = r.hgetall(keys.stats("limcap"))
    assert int(stats[b"requeued"]) >= caught  # the reaper returned the killed workers' tasks
    assert int(stats.get(b"active_underflow", 0)) == 0
    assert int(r.hget(keys.active, "limcap") or 0) == 0
    assert not list(r.scan_iter(match=keys.prefix + "unique:*"))
    assert not list(r.scan_iter(match=keys.prefix + "inflight:*"))
    assert r.llen(keys.dead("limcap")) == 0  # nothing lost, nothing given up on
    # the ready count, put back over the cap and returned by reaps, stayed exact
    assert queued_and_lengths(r, keys, "limcap") == (0, 0)
    assert int(stats.get(b"queued_repaired", 0)) == 0


def _worker_id(r: redis.Redis, keys: Keys, pid: int) -> str:
    for member in r.zrange(keys.workers, 0, -1):
        text = member.decode() if isinstance(member, bytes) else str(member)
        if int(text.rsplit("-", 2)[1]) == pid:
            return text
    return "none"
