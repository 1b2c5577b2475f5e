"""A long ``--grace`` costs nothing on an idle pod: on SIGTERM a real
``taskscale worker`` exits as soon as it has nothing running, not when the
grace ends -- at once when idle, and right after its last task otherwise.
This is what lets the chart size --grace and terminationGracePeriodSeconds
to the longest task (docs/operating.md, "Rollouts that do not cut tasks")."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import redis

from support.waiting import wait_until
from support.workers import example_worker
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOUR = "3600"
#: Seconds from "nothing left to run" to the process's exit, at most: the
#: interpreter's exit and a loaded CI machine (the grace is an hour).
PROMPT_S = 5.0


def stop(proc: subprocess.Popen[bytes]) -> float:
    """SIGTERM ``proc``; seconds until it exited (with 0)."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    return time.monotonic() - started


def test_an_idle_worker_exits_at_once_whatever_its_grace(
    r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    proc = example_worker(redis_url, "sleep", "--grace", HOUR)
    try:
        wait_until(lambda: r.zcard(keys.workers) == 1, timeout=30)  # up and idle
        assert stop(proc) < PROMPT_S
    finally:
        proc.kill()
        proc.communicate()
    assert r.zcard(keys.workers) == 0


def test_a_busy_worker_exits_right_after_its_last_task(
    r: redis.Redis, redis_url: str, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("sleep", seconds=3.0)
    proc = example_worker(redis_url, "sleep", "--grace", HOUR)
    try:
        wait_until(lambda: int(r.hget(keys.active, "sleep") or 0) == 1, timeout=30)
        took = stop(proc)
    finally:
        proc.kill()
        proc.communicate()
    # the task ran to its end (never cut, never returned), then the worker left
    assert int(r.hget(keys.stats("sleep"), "completed") or 0) == 1
    assert int(r.hget(keys.stats("sleep"), "requeued") or 0) == 0
    assert took < 3.0 + PROMPT_S
