"""Crash test: workers SIGKILLed again and again while two schedulers run.

Afterwards every task has completed at least once, only tasks that were in
flight on a killed worker ran more than once, ACTIVE_TASKS is exactly 0 and
was never decremented below 0, and nothing is left in flight.  The ready
count QUEUED equals the ready lists' length at every sample taken during the
kills (one MULTI each) and at the end, and the schedulers' recounts never
had to repair it.
"""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections import Counter

import pytest
import redis
from crash_tasks import FINISHED, STARTED

from support.counters import queued_and_lengths
from support.waiting import wait_until
from support.workers import live_pids, taskscale_process, worker_argv
from taskscale.connection import connect
from taskscale.keys import Keys
from taskscale.producer import Call, Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASKS = 300
WORKERS = 3
KILLS = 12
KILL_EVERY_S = 0.5


def crash_worker(url: str) -> subprocess.Popen[bytes]:
    argv = worker_argv(
        "crashsleep",
        "crash_tasks",
        threads=2,
        lease=1.5,
        heartbeat=0.3,
        idle_wait=0.5,
        grace=20,
        # a task at the head of the queue may be in flight at many kills; this
        # test is about losing nothing, not the poison-task limit (default 5)
        max_lost=1000,
        log_level="WARNING",
    )
    return taskscale_process(url, *argv, stderr=subprocess.DEVNULL)


def test_sigkilled_workers_lose_nothing_and_rerun_only_what_was_in_flight(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    rng = random.Random(7)
    now_ids = producer.enqueue_many(
        "crashsleep", [Call((i, rng.uniform(0.02, 0.1))) for i in range(TASKS // 2)]
    )
    later_ids = [  # delayed ones keep the schedulers busy during the kills
        producer.enqueue("crashsleep", i, rng.uniform(0.02, 0.1), delay=rng.uniform(0.2, 6.0))
        for i in range(TASKS // 2, TASKS)
    ]
    number_of = {tid: n for n, tid in enumerate(now_ids + later_ids)}

    negative: list[int] = []
    queued_off: list[tuple[int, int]] = []  # (QUEUED, lists' length) seen apart
    sampling = threading.Event()

    def sample_active() -> None:
        sampler = connect(redis_url)
        deadline = time.monotonic() + 120
        while not sampling.is_set() and time.monotonic() < deadline:
            value = int(sampler.hget(keys.active, "crashsleep") or 0)
            if value < 0:
                negative.append(value)
            counted, length = queued_and_lengths(sampler, keys, "crashsleep")
            if counted != length:
                queued_off.append((counted, length))
            time.sleep(0.005)
        sampler.close()

    schedulers = [
        taskscale_process(redis_url, "scheduler", "--lease", "1.5", "--log-level", "WARNING")
        for _ in range(2)
    ]
    workers = [crash_worker(redis_url) for _ in range(WORKERS)]
    sampler = threading.Thread(target=sample_active, daemon=True)
    sampler.start()
    in_flight_at_kill: Counter[str] = Counter()
    kills = 0
    try:
        deadline = time.monotonic() + 120  # generous: restarts are slow on a loaded machine
        while kills < KILLS and time.monotonic() < deadline:
            time.sleep(KILL_EVERY_S)
            # kill only workers that are up: one still starting has nothing in
            # flight and would prove nothing
            live = live_pids(r, keys)
            candidates = [i for i, proc in enumerate(workers) if proc.pid in live]
            if not candidates:
                continue
            victim = workers.pop(rng.choice(candidates))
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            # A dead worker's in-flight hash is frozen until the reaper takes it.
            for key in r.scan_iter(match=keys.prefix + "inflight:*", count=1000):
                for task_id in r.hkeys(key):
                    text = task_id.decode() if isinstance(task_id, bytes) else task_id
                    in_flight_at_kill[text] += 1
            workers.append(crash_worker(redis_url))

        def finished_all() -> bool:
            return len(set(r.lrange(FINISHED, 0, -1))) == TASKS

        wait_until(finished_all, timeout=60, interval=0.2)
        wait_until(lambda: int(r.hget(keys.active, "crashsleep") or 0) == 0, timeout=30)
        # every killed worker reaped, every live one up (a TERM before its
        # handler is installed would kill it)
        wait_until(lambda: {p.pid for p in workers} == live_pids(r, keys), timeout=30)
        for proc in workers + schedulers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(30) for proc in workers + schedulers]
    finally:
        sampling.set()
        for proc in workers + schedulers:
            proc.kill()
            proc.wait(10)
    sampler.join(10)

    started = Counter(int(x) for x in r.lrange(STARTED, 0, -1))
    finished = Counter(int(x) for x in r.lrange(FINISHED, 0, -1))
    assert kills == KILLS and codes == [0] * len(codes)
    assert set(finished) == set(range(TASKS))  # every task completed at least once
    reran = {n for n, c in started.items() if c > 1}
    assert reran <= {number_of[t] for t in in_flight_at_kill}  # only those in flight at a kill
    for tid, n in number_of.items():
        assert started[n] <= 1 + in_flight_at_kill[tid], (n, started[n])
    assert int(r.hget(keys.active, "crashsleep") or 0) == 0
    assert negative == []
    stats = r.hgetall(keys.stats("crashsleep"))
    assert int(stats.get(b"active_underflow", 0)) == 0  # the clamp never had to act
    requeued = int(stats.get(b"requeued", 0))
    assert requeued > 0  # kills did catch tasks in flight
    assert int(stats[b"claimed"]) == int(stats[b"completed"]) + requeued
    assert not list(r.scan_iter(match=keys.prefix + "inflight:*"))
    assert r.zcard(keys.workers) == 0
    assert r.llen(keys.queue("crashsleep")) == 0 and r.zcard(keys.delayed("crashsleep")) == 0
    assert queued_and_lengths(r, keys, "crashsleep") == (0, 0)
    assert queued_off == []  # exact at every sample, kills and reaps included
    assert int(stats.get(b"queued_repaired", 0)) == 0  # the recounts found nothing to fix
