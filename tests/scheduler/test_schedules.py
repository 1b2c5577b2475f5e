"""Periodic schedules against a real redis-server and real `taskscale scheduler`
processes: each occurrence exactly once, across concurrent schedulers and
across all of them stopping; pause, resume, remove; what status shows."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from support.waiting import wait_until
from support.workers import taskscale_process
from taskscale.keys import Keys
from taskscale.scheduling.schedules import Schedules, advance_due
from taskscale.status import collect, render

pytestmark = pytest.mark.integration


def now_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


@contextmanager
def scheduler_processes(url: str, r: redis.Redis, keys: Keys, n: int) -> Iterator[None]:
    """``n`` real `taskscale scheduler` processes, alive (registered) on entry,
    stopped with SIGTERM on exit."""
    procs = [
        taskscale_process(url, "scheduler", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(n)
    ]
    try:
        wait_until(lambda: r.zcard(keys.schedulers) >= n, timeout=30)
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err.decode()


def ready_occurrences(r: redis.Redis, keys: Keys, task_type: str) -> list[int]:
    """Occurrence times of the tasks the schedulers promoted, in queue order."""
    return [json.loads(raw)["occurrence_ms"] for raw in r.lrange(keys.queue(task_type), 0, -1)]


@pytest.mark.slow
def test_three_schedulers_enqueue_each_occurrence_of_an_every_second_schedule_once(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    with scheduler_processes(redis_url, r, keys, 3):
        started = now_ms(r)
        Schedules(r, keys=keys).add("tick", "beat", every=1)
        time.sleep(20.3)
        ended = now_ms(r)
    seen = ready_occurrences(r, keys, "beat")
    assert len(seen) == len(set(seen)), f"duplicated occurrences: {sorted(seen)}"
    assert 19 <= len(seen) <= 21
    assert all(started < at <= ended for at in seen)
    assert all(b - a == 1000 for a, b in itertools.pairwise(seen))  # none skipped
    # the occurrence after the last one promoted is pending, once
    pending = r.zrange(keys.delayed("beat"), 0, -1, withscores=True)
    assert [int(score) for _, score in pending] == [seen[-1] + 1000]
    assert json.loads(pending[0][0])["id"] == f"schedule.tick.{seen[-1] + 1000}"


@pytest.mark.slow
@pytest.mark.parametrize("catch_up", [False, True])
def test_a_schedule_survives_every_scheduler_stopping_and_missed_ticks_run_once(
    redis_url: str, r: redis.Redis, keys: Keys, catch_up: bool
) -> None:
    with scheduler_processes(redis_url, r, keys, 1):
        Schedules(r, keys=keys).add("tick", "beat", every=1, catch_up=catch_up)
        wait_until(lambda: r.llen(keys.queue("beat")) >= 2, timeout=10)
    before = ready_occurrences(r, keys, "beat")
    [(_, score)] = r.zrange(keys.delayed("beat"), 0, -1, withscores=True)
    pending = int(score)  # materialized before the stop: it must run, once
    time.sleep(4.5)  # ticks are missed while no scheduler runs
    restarted = now_ms(r)
    with scheduler_processes(redis_url, r, keys, 2):
        wait_until(
            lambda: any(at > restarted for at in ready_occurrences(r, keys, "beat")), timeout=10
        )
    seen = ready_occurrences(r, keys, "beat")
    assert len(seen) == len(set(seen))
    assert seen[: len(before)] == before and len(before) >= 2
    assert all(b - a == 1000 for a, b in itertools.pairwise(before))
    after = seen[len(before) :]
    assert after[0] == pending and pending == before[-1] + 1000
    missed = [at for at in after if at <= restarted]
    if catch_up:  # every missed tick ran, each once, in order
        assert len(missed) >= 4
        assert all(b - a == 1000 for a, b in itertools.pairwise(seen))
    else:  # the pending occurrence ran once, late; the other missed ticks did not
        assert missed == [pending]
        assert after[1] > restarted and after[1] - pending >= 4000


def test_a_six_field_cron_schedule_fires_on_whole_seconds(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    with scheduler_processes(redis_url, r, keys, 1):
        Schedules(r, keys=keys).add("sec", "beat", "x", cron="*/1 * * * * *", tz="Asia/Tokyo")
        wait_until(lambda: r.llen(keys.queue("beat")) >= 3, timeout=15)
    seen = ready_occurrences(r, keys, "beat")
    assert all(at % 1000 == 0 for at in seen)
    assert all(b - a == 1000 for a, b in itertools.pairwise(seen))
    first = json.loads(r.lindex(keys.queue("beat"), 0))
    assert first["args"] == ["x"] and first["schedule"] == "sec"
    assert first["due_ms"] == first["occurrence_ms"]


def test_adding_the_same_definition_again_changes_nothing_a_new_one_replaces_it(
    r: redis.Redis, keys: Keys
) -> None:
    schedules = Schedules(r, keys=keys)
    outcome, first = schedules.add("report", "mail", "weekly", cron="0 9 * * MON", tz="UTC")
    assert outcome == "created" and first.next_ms > now_ms(r)
    outcome, again = schedules.add("report", "mail", "weekly", cron="0 9 * * MON", tz="UTC")
    assert outcome == "unchanged" and again.next_ms == first.next_ms
    assert r.zcard(keys.delayed("mail")) == 1
    outcome, changed = schedules.add("report", "mail", "weekly", cron="0 10 * * MON", tz="UTC")
    assert outcome == "updated" and changed.next_ms == first.next_ms + 3600_000
    assert [int(s) for _, s in r.zrange(keys.delayed("mail"), 0, -1, withscores=True)] == [
        changed.next_ms
    ]
    assert int(r.hget(keys.stats("mail"), "withdrawn")) == 1  # the withdrawn occurrence
    assert r.hget(keys.stats("mail"), "cancelled") is None  # nothing was cancelled


def test_two_schedulers_advancing_the_same_occurrence_enqueue_the_next_one_once(
    r: redis.Redis, keys: Keys
) -> None:
    """The compare-and-set, without relying on timing: two schedulers read the
    same rev and next_ms and both call schedule_advance with them; the second
    finds the schedule moved and writes nothing."""
    from taskscale.luascripts import bound_script

    schedules = Schedules(r, keys=keys)
    _, seen = schedules.add("race", "beat", every=60)
    enqueued = int(r.hget(keys.stats("beat"), "enqueued"))
    following = seen.next_ms + 60_000
    advance = bound_script(r, "schedule_advance")
    args = [keys.prefix, "race", seen.rev, seen.next_ms, following, ""]
    replies = [advance(keys=[keys.schedules, keys.types], args=args) for _ in range(2)]
    assert replies == [[1, following], [0, b"moved"]]
    ids = [json.loads(raw)["id"] for raw in r.zrange(keys.delayed("beat"), 0, -1)]
    assert ids == [f"schedule.race.{seen.next_ms}", f"schedule.race.{following}"]
    assert int(r.hget(keys.stats("beat"), "enqueued")) == enqueued + 1
    after = schedules.get("race")
    assert after is not None
    assert (after.next_ms, after.last_ms) == (following, seen.next_ms)
    assert after.occurrences == seen.occurrences + 1
    assert r.zscore(keys.schedules, "race") == following


def test_cron_is_read_in_the_schedules_time_zone(r: redis.Redis, keys: Keys) -> None:
    _, ny = Schedules(r, keys=keys).add("ny", "mail", cron="30 9 * * *", tz="America/New_York")
    _, utc = Schedules(r, keys=keys).add("utc", "mail", cron="30 9 * * *")
    assert time.gmtime(utc.next_ms / 1000)[3:5] == (9, 30)
    # 09:30 in New York is 13:30 or 14:30 UTC (daylight saving or not)
    assert time.gmtime(ny.next_ms / 1000)[3:5] in ((13, 30), (14, 30))


def test_pause_withdraws_the_pending_occurrence_and_resume_starts_again(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    schedules = Schedules(r, keys=keys)
    with scheduler_processes(redis_url, r, keys, 1):
        schedules.add("tick", "beat", every=0.5)
        wait_until(lambda: r.llen(keys.queue("beat")) >= 1, timeout=10)
        assert schedules.pause("tick") == "done"
        assert schedules.pause("tick") == "unchanged"
        paused_at, count = now_ms(r), r.llen(keys.queue("beat"))
        assert r.zcard(keys.delayed("beat")) == 0
        time.sleep(1.5)
        assert r.llen(keys.queue("beat")) == count
        info = schedules.get("tick")
        assert info is not None and info.paused and info.next_ms == 0
        assert schedules.resume("tick") == "done"
        resumed_at = now_ms(r)
        wait_until(lambda: r.llen(keys.queue("beat")) >= count + 3, timeout=10)
    seen = ready_occurrences(r, keys, "beat")
    assert not [at for at in seen if paused_at + 500 < at <= resumed_at]
    assert len(seen) == len(set(seen))


def test_remove_deletes_the_schedule_and_its_pending_occurrence(r: redis.Redis, keys: Keys) -> None:
    schedules = Schedules(r, keys=keys)
    schedules.add("tick", "beat", every=60)
    assert r.zcard(keys.delayed("beat")) == 1
    assert schedules.remove("tick") == "done"
    assert schedules.remove("tick") == "missing"
    assert schedules.get("tick") is None and schedules.all() == []
    assert r.zcard(keys.delayed("beat")) == 0 and r.zcard(keys.schedules) == 0
    assert advance_due(r, keys, now_ms=now_ms(r) + 3600_000) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression '61 * * * *'"),
        ({"cron": "every day"}, "invalid cron expression"),
        ({"every": 0}, "every must be a finite number of seconds > 0"),
        ({"every": -5}, "every must be a finite number of seconds > 0"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({}, "give exactly one of"),
        ({"cron": "* * * * *", "every": 5}, "give exactly one of"),
        ({"every": 5, "tz": "UTC"}, "tz applies to cron schedules only"),
    ],
)
def test_bad_timing_is_a_clear_error_and_writes_nothing(
    r: redis.Redis, keys: Keys, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*").replace("(", r"\(")):
        Schedules(r, keys=keys).add("job", "beat", **kwargs)  # type: ignore[arg-type]
    assert r.keys("*") == []


@pytest.mark.parametrize("name", ["", "has space", "a:b", "x" * 101])
def test_a_bad_schedule_name_is_refused(r: redis.Redis, keys: Keys, name: str) -> None:
    with pytest.raises(ValueError, match="invalid schedule name"):
        Schedules(r, keys=keys).add(name, "beat", every=5)
    assert r.keys("*") == []


def test_the_observer_sees_the_next_occurrence_as_upcoming(r: redis.Redis, keys: Keys) -> None:
    from taskscale.controller.observer import Observer, ObserveRequest

    Schedules(r, keys=keys).add("soon", "report", every=10)  # due within 10 s
    observer = Observer(r, keys)
    seen = observer.observe(
        {
            "warm": ObserveRequest(types=("report",), lead_s=15.0),
            "cold": ObserveRequest(types=("report",), lead_s=0.0),
        }
    )
    assert seen["warm"].types["report"].upcoming == 1
    assert seen["cold"].types["report"].upcoming == 0
    assert seen["warm"].types["report"].queued == 0


def test_status_lists_schedules_with_type_next_due_and_paused(r: redis.Redis, keys: Keys) -> None:
    schedules = Schedules(r, keys=keys)
    schedules.add("hourly", "report", cron="0 * * * *")
    schedules.add("minutely", "ping", every=60)
    schedules.pause("minutely")
    status = collect(r, keys)
    by_name = {s["name"]: s for s in status["schedules"]}
    assert by_name["hourly"]["type"] == "report" and not by_name["hourly"]["paused"]
    assert by_name["hourly"]["next_ms"] % 3600_000 == 0
    assert by_name["minutely"]["paused"] and by_name["minutely"]["next_ms"] is None
    text = render(status)
    assert "SCHEDULE" in text and "cron 0 * * * *" in text
    row = next(line for line in text.splitlines() if line.startswith("minutely"))
    assert row.split()[1] == "ping" and " yes " in f" {row} "


def test_a_schedule_added_by_another_language_is_materialized_by_a_scheduler(
    r: redis.Redis, keys: Keys
) -> None:
    from taskscale.luascripts import script_source

    add = r.register_script(script_source("schedule_add"))
    template = '{"type":"beat","args":[1],"kwargs":{},"priority":2}'
    args = [keys.prefix, "foreign", "beat", template, "", "5000", "", "0"]
    reply = add(keys=[keys.schedules], args=args)
    assert reply == [b"created", 1]
    assert r.llen(keys.scheduler_wake) == 1  # a sleeping scheduler looks at once
    assert advance_due(r, keys)[0][0] == "foreign"
    [(raw, score)] = r.zrange(keys.delayed("beat"), 0, -1, withscores=True)
    env = json.loads(raw)
    assert env["priority"] == 2 and env["args"] == [1] and score % 5000 == 0
    with pytest.raises(redis.ResponseError, match="invalid schedule: give exactly one"):
        add(keys=[keys.schedules], args=[keys.prefix, "bad", "beat", template, "", "", "", "0"])


def test_a_cron_that_only_a_scheduler_can_check_is_parked_with_its_error(
    r: redis.Redis, keys: Keys
) -> None:
    from taskscale.luascripts import script_source

    add = r.register_script(script_source("schedule_add"))
    template = '{"type":"beat"}'
    args = [keys.prefix, "typo", "beat", template, "0 25 * * *", "", "", "0"]
    add(keys=[keys.schedules], args=args)
    assert advance_due(r, keys) == []
    info = Schedules(r, keys=keys).get("typo")
    assert info is not None and "invalid cron expression" in info.error
    assert r.zscore(keys.schedules, "typo") == float("inf")  # not looked at again
    assert r.zcard(keys.delayed("beat")) == 0
