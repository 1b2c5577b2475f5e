"""``taskscale worker --once`` (a Job pod's worker): exactly one task claimed,
run and recorded, then exit 0; no task within ``--once-wait``: exit 0 with a
log line; SIGKILL in the middle of the task: the reaper returns it through
the lease and a normal worker runs it; SIGTERM in the middle: the grace."""

from __future__ import annotations

import signal
import time

import pytest
import redis
from gate_tasks import FINISHED, GATE, STARTED

from support.counters import active, queued_and_lengths, stat
from support.waiting import wait_until
from support.workers import (
    kill,
    output,
    processes,
    run_taskscale,
    start,
    start_scheduler,
    worker_argv,
)
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def once_argv(*, wait: float = 20.0, lease: float = 10.0) -> list[str]:
    """``taskscale worker --once`` of ``gated``, with more slots than its one task."""
    flags = worker_argv(
        "gated",
        "gate_tasks",
        once_wait=wait,
        lease=lease,
        heartbeat=min(1.0, lease / 4),
        idle_wait=0.5,
        threads=4,
    )
    return [*flags, "--once"]


def runs(r: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(key).items()}


def test_two_once_workers_and_three_tasks_run_two_and_leave_one_queued(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    for n in range(3):
        producer.enqueue("gated", n)
    with processes(*(start(redis_url, once_argv()) for _ in range(2))) as workers:
        # both hold one task each (the gate is shut), neither takes the third
        wait_until(lambda: sum(runs(r, STARTED).values()) == 2, timeout=30)
        time.sleep(1.0)  # free slots and a queued task: a plain worker would claim it now
        assert sum(runs(r, STARTED).values()) == 2
        assert queued_and_lengths(r, keys, "gated") == (1, 1)
        r.set(GATE, 1)
        codes = [w.wait(30) for w in workers]
        logs = [output(w) for w in workers]
    assert codes == [0, 0], logs
    assert all("ran its one task; exiting (--once)" in text for text in logs), logs
    finished = runs(r, FINISHED)
    assert sorted(finished.values()) == [1, 1]  # two different tasks, once each
    assert queued_and_lengths(r, keys, "gated") == (1, 1)
    assert stat(r, keys, "gated", "completed") == 2  # the outcomes were recorded
    assert active(r, keys, "gated") == 0
    assert r.zcard(keys.workers) == 0  # both deregistered


def test_once_worker_exits_0_when_no_task_comes(redis_url: str, r: redis.Redis, keys: Keys) -> None:
    started = time.monotonic()
    with processes(start(redis_url, once_argv(wait=1.0))) as (worker,):
        code = worker.wait(30)
        text = output(worker)
    assert code == 0, text
    assert "no task came within --once-wait; exiting (--once)" in text
    assert time.monotonic() - started < 20
    assert r.zcard(keys.workers) == 0


def test_task_of_a_killed_once_worker_comes_back_through_the_lease(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("gated", 7)
    once = start(redis_url, once_argv(lease=1.5))
    with processes(once, start_scheduler(redis_url, lease=1.5)) as procs:
        wait_until(lambda: runs(r, STARTED).get("7") == 1, timeout=30)
        kill(once)  # SIGKILL: no shutdown code runs
        assert queued_and_lengths(r, keys, "gated") == (0, 0)
        r.set(GATE, 1)
        plain = worker_argv(
            "gated", "gate_tasks", lease=1.5, heartbeat=0.3, idle_wait=0.5, threads=1
        )
        procs.append(start(redis_url, plain))
        wait_until(lambda: runs(r, FINISHED).get("7") == 1, timeout=30)
        wait_until(lambda: stat(r, keys, "gated", "completed") == 1, timeout=10)
    assert runs(r, STARTED) == {"7": 2}  # the killed run, then the reclaimed one
    assert runs(r, FINISHED) == {"7": 1}
    assert active(r, keys, "gated") == 0


def test_sigterm_mid_task_is_the_normal_grace(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("gated", 3)
    with processes(start(redis_url, once_argv())) as (worker,):
        wait_until(lambda: runs(r, STARTED).get("3") == 1, timeout=30)
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        r.set(GATE, 1)  # the task ends within the grace
        code = worker.wait(30)
    assert code == 0
    assert runs(r, FINISHED) == {"3": 1}
    assert stat(r, keys, "gated", "completed") == 1
    assert queued_and_lengths(r, keys, "gated") == (0, 0)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--once-wait", "0"], "--once-wait must be positive"),
        (["--once-wait", "soon"], "is not a number of seconds"),
        (["--processes", "2"], "--once runs one task in one process"),
    ],
)
def test_once_refuses_a_bad_command_line(redis_url: str, extra: list[str], said: str) -> None:
    done = run_taskscale(redis_url, *once_argv(), *extra, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
