"""Pausing a type with a real worker: `taskscale types pause` keeps a type's
tasks queued while another type on the same worker runs, a task already
running finishes, `taskscale status` says "paused", and `resume` wakes the
idle worker at once (its idle wait is 30 s here)."""

from __future__ import annotations

import time

import pytest
import redis

from support.waiting import wait_until
from support.workers import run_taskscale, running_worker
from taskscale.keys import Keys
from taskscale.pausing import pause_type, paused_types, resume_type
from taskscale.producer import Call, Producer

pytestmark = pytest.mark.integration


def completed(r: redis.Redis, keys: Keys, task_type: str) -> int:
    return int(r.hget(keys.stats(task_type), "completed") or 0)


def test_a_paused_type_stays_queued_while_another_runs_and_resume_runs_it(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    done = run_taskscale(redis_url, "types", "pause", "noop", check=True)
    assert done.stdout.strip() == "paused task type noop"
    producer.enqueue_many("noop", [Call((i,)) for i in range(3)])
    producer.enqueue_many("echo", [Call((i,)) for i in range(3)])
    with running_worker(redis_url, ("noop", "echo"), threads=2, idle_wait_s=30):
        wait_until(lambda: completed(r, keys, "echo") == 3, timeout=20)
        time.sleep(1.0)  # claims come and go: none takes a paused noop
        assert completed(r, keys, "noop") == 0
        assert int(r.hget(keys.queued, "noop") or 0) == 3
        assert sum(r.llen(keys.queue("noop", p)) for p in range(10)) == 3
        status = run_taskscale(redis_url, "status", check=True).stdout
        noop_line = next(line for line in status.splitlines() if line.startswith("noop "))
        assert "paused" in noop_line
        listed = run_taskscale(redis_url, "types", "paused", check=True).stdout
        assert listed.startswith("noop\tpaused since ")
        started = time.monotonic()
        done = run_taskscale(redis_url, "types", "resume", "noop", check=True)
        assert done.stdout.strip() == "resumed task type noop"
        wait_until(lambda: completed(r, keys, "noop") == 3, timeout=20)
        # the resume's wake token, not the 30 s idle wait (a CLI start included)
        assert time.monotonic() - started < 15
    assert paused_types(client=r, keys=keys) == {}


def test_a_running_task_finishes_when_its_type_is_paused(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("sleep", [Call((1.0,)), Call((1.0,))])
    with running_worker(redis_url, ("sleep",), threads=1, idle_wait_s=0.2):
        wait_until(lambda: int(r.hget(keys.active, "sleep") or 0) == 1, timeout=10)
        assert pause_type("sleep", client=r, keys=keys) is True
        wait_until(lambda: completed(r, keys, "sleep") == 1, timeout=10)
        time.sleep(1.0)
        assert completed(r, keys, "sleep") == 1  # the second one was not claimed
        assert int(r.hget(keys.active, "sleep") or 0) == 0
        assert resume_type("sleep", client=r, keys=keys) is True
        wait_until(lambda: completed(r, keys, "sleep") == 2, timeout=10)


def test_pause_and_resume_say_whether_they_changed_anything(r: redis.Redis, keys: Keys) -> None:
    assert pause_type("mail", client=r, keys=keys) is True
    since = paused_types(client=r, keys=keys)["mail"]
    assert abs(since / 1000 - time.time()) < 60  # unix ms, Redis clock
    time.sleep(0.01)
    assert pause_type("mail", client=r, keys=keys) is False
    assert paused_types(client=r, keys=keys) == {"mail": since}  # the first time kept
    assert resume_type("mail", client=r, keys=keys) is True
    assert resume_type("mail", client=r, keys=keys) is False
    assert r.llen(keys.wake("mail")) == 2  # each resume wakes the type's workers


def test_malformed_input_is_refused(redis_url: str, r: redis.Redis, keys: Keys) -> None:
    with pytest.raises(ValueError):
        pause_type("bad type!", client=r, keys=keys)
    done = run_taskscale(redis_url, "types", "pause", "bad type!")
    assert done.returncode != 0 and "bad type!" in done.stderr
    r.set(keys.paused, "not a hash")
    with pytest.raises(redis.ResponseError, match="BADKEY"):
        pause_type("mail", client=r, keys=keys)
    assert r.get(keys.paused) == b"not a hash"
    r.delete(keys.paused)
    r.hset(keys.paused, "mail", "garbage")
    assert paused_types(client=r, keys=keys) == {"mail": 0}
