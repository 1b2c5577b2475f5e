"""`taskscale status` says what would otherwise stall silently: overdue
delayed tasks with no scheduler alive, or overdue beyond a threshold while
one is (stuck or lagging), ready tasks no live worker serves."""

from __future__ import annotations

import json
import re

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.cli import main
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.scheduling.scheduler import Scheduler, SchedulerSettings
from taskscale.status import OVERDUE_WARN_S, collect, render

pytestmark = pytest.mark.integration


def make_overdue(r: redis.Redis, keys: Keys, task_type: str, by_ms: int = 60_000) -> None:
    """Move every delayed task of the type's due time ``by_ms`` into the past."""
    sec, usec = r.time()
    now_ms = int(sec) * 1000 + int(usec) // 1000
    for member in r.zrange(keys.delayed(task_type), 0, -1):
        r.zadd(keys.delayed(task_type), {member: now_ms - by_ms})


def test_overdue_delayed_tasks_without_a_scheduler_are_a_warning(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("mail", delay=3600)
    producer.enqueue("mail", delay=3600)
    assert collect(r, keys)["warnings"] == []  # delayed but not due: nothing wrong
    make_overdue(r, keys, "mail")
    status = collect(r, keys)
    assert status["types"]["mail"]["overdue"] == 2
    assert status["schedulers"] == []
    [warning] = status["warnings"]
    assert warning.startswith("delayed tasks are overdue and no scheduler is alive: mail (2)")
    assert "WARNING: delayed tasks are overdue" in render(status)


def test_a_running_scheduler_is_listed_and_silences_the_warning(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("later", delay=3600)
    make_overdue(r, keys, "later")
    with running_scheduler(redis_url, keys=keys, lease_s=4.0) as scheduler:
        wait_until(lambda: collect(r, keys)["schedulers"] == [scheduler.id])
        wait_until(lambda: collect(r, keys)["types"]["later"]["delayed"] == 0)  # promoted
        assert "schedulers alive: 1" in render(collect(r, keys))
        # A due task the scheduler has not reached yet is no warning while it lives.
        producer.enqueue("again", delay=3600)
        make_overdue(r, keys, "again")
        assert not any("no scheduler" in w for w in collect(r, keys)["warnings"])
    assert collect(r, keys)["schedulers"] == []  # a clean stop deregisters at once


def test_overdue_beyond_the_threshold_while_a_scheduler_is_alive_is_a_warning(
    redis_url: str,
    r: redis.Redis,
    keys: Keys,
    producer: Producer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A scheduler that heartbeats but does not promote (stuck, or far behind):
    its heartbeat silences the no-scheduler warning, not the overdue one."""
    stuck = Scheduler(r, keys=keys, settings=SchedulerSettings(lease_s=600))
    assert stuck.beat() == 1  # alive, and never runs a promotion
    producer.enqueue("report", delay=3600)
    producer.enqueue("mail", delay=3600)
    make_overdue(r, keys, "mail", by_ms=int(OVERDUE_WARN_S * 1000) - 10_000)  # within it
    status = collect(r, keys)
    assert status["types"]["mail"]["overdue"] == 1
    assert OVERDUE_WARN_S - 11 < status["types"]["mail"]["oldest_overdue_s"] < OVERDUE_WARN_S
    assert status["warnings"] == []  # a live scheduler may not have reached it yet

    make_overdue(r, keys, "report", by_ms=95_000)
    status = collect(r, keys)
    assert 95 <= status["types"]["report"]["oldest_overdue_s"] < 105
    expected = re.compile(
        rf"delayed tasks are overdue by more than {OVERDUE_WARN_S:g} s although 1 "
        r"scheduler\(s\) are alive: report \(by (9[5-9]|10[0-4]) s\); a scheduler may be stuck"
    )  # "mail" (within the threshold) is not listed
    [warning] = status["warnings"]
    assert expected.match(warning), warning

    assert main(["status", "--redis-url", redis_url]) == 0
    text = capsys.readouterr().out
    warned = [line[len("WARNING: ") :] for line in text.splitlines() if "WARNING" in line]
    assert len(warned) == 1 and expected.match(warned[0]), text
    assert main(["status", "--redis-url", redis_url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["warnings"]) == 1 and expected.match(doc["warnings"][0]), doc["warnings"]
    assert doc["schedulers"] == [stuck.id]
    assert doc["types"]["report"]["oldest_overdue_s"] >= 95


def test_a_killed_scheduler_drops_out_when_its_lease_ends(r: redis.Redis, keys: Keys) -> None:
    scheduler = Scheduler(r, keys=keys, settings=SchedulerSettings(lease_s=0.3))
    assert scheduler.beat() == 1
    assert collect(r, keys)["schedulers"] == [scheduler.id]
    wait_until(lambda: collect(r, keys)["schedulers"] == [])  # no stop: the lease lapses


def test_ready_tasks_of_a_type_no_live_worker_serves_are_a_warning(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("orphan", 1)
    with running_worker(redis_url, ("noop",)):
        wait_until(lambda: len(collect(r, keys)["workers"]) == 1)
        warnings = collect(r, keys)["warnings"]
    assert warnings == [
        "orphan: 1 task(s) ready and no live worker serves orphan "
        "(start one with --types including it, or `taskscale types forget` a mistake)"
    ]
