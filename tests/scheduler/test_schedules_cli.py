"""`taskscale schedules ...`, the scheduler's occurrence metric, and the
timing rules (cron in a time zone across daylight saving, intervals, catch-up)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import redis

from taskscale.cli import main
from taskscale.keys import Keys
from taskscale.scheduling.schedule_times import first_after, following, timing
from taskscale.scheduling.scheduler import Scheduler
from taskscale.scheduling.scheduler_metrics import SchedulerMetrics
from taskscale.scheduling.schedules import Schedules


def ms(*when: int) -> int:
    return round(datetime(*when, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


def test_every_fires_at_multiples_of_the_interval_since_the_epoch() -> None:
    spec = timing(every=60)
    assert first_after(spec, ms(2026, 1, 1, 12, 0, 30)) == ms(2026, 1, 1, 12, 1)
    assert first_after(spec, ms(2026, 1, 1, 12, 1)) == ms(2026, 1, 1, 12, 2)  # strictly after


def test_cron_in_a_time_zone_follows_daylight_saving() -> None:
    spec = timing(cron="0 9 * * *", tz="Europe/Berlin")
    assert first_after(spec, ms(2026, 1, 10)) == ms(2026, 1, 10, 8)  # CET = UTC+1
    assert first_after(spec, ms(2026, 7, 10)) == ms(2026, 7, 10, 7)  # CEST = UTC+2
    # 02:30 does not exist on 29 March 2026 in Berlin: it runs at 03:00 CEST
    skipped = timing(cron="30 2 * * *", tz="Europe/Berlin")
    assert first_after(skipped, ms(2026, 3, 28, 12)) == ms(2026, 3, 29, 1)


def test_missed_ticks_collapse_into_one_unless_catch_up() -> None:
    every_minute = timing(every=60)
    pending, back = ms(2026, 1, 1, 12, 0), ms(2026, 1, 1, 12, 5, 10)
    assert following(every_minute, pending, back) == ms(2026, 1, 1, 12, 6)
    catch_up = timing(every=60, catch_up=True)
    assert following(catch_up, pending, back) == ms(2026, 1, 1, 12, 1)
    assert following(catch_up, 0, back) == ms(2026, 1, 1, 12, 6)  # a new schedule starts now


@pytest.mark.integration
def test_the_scheduler_counts_the_occurrences_it_enqueued(r: redis.Redis, keys: Keys) -> None:
    metrics = SchedulerMetrics(lease_s=10.0)
    scheduler = Scheduler(r, keys=keys, metrics=metrics)
    Schedules(r, keys=keys).add("tick", "beat", every=3600)
    now = int(r.time()[0]) * 1000
    assert scheduler.advance_schedules(now) == []  # not due
    assert scheduler.advance_schedules(now + 3600_000) != []  # due: the next one is written
    assert scheduler.advance_schedules(now + 3600_000) == []  # and only once
    value = metrics.registry.get_sample_value(
        "taskscale_scheduler_schedule_occurrences_total", {"schedule": "tick"}
    )
    assert value == 1.0 and scheduler.occurrences == 1


@pytest.mark.integration
def test_cli_adds_lists_pauses_resumes_and_removes(
    redis_url: str, r: redis.Redis, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--redis-url", redis_url, "--namespace", "taskscale"]
    cmd = ["schedules", "add", "nightly", "report", "--cron", "0 3 * * *", "--tz", "Asia/Tokyo"]
    assert main([*cmd, "--args", '["full"]', "--priority", "high", *common]) == 0
    assert "schedule nightly: created; next occurrence" in capsys.readouterr().out
    assert main([*cmd, "--args", '["full"]', "--priority", "high", *common]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert main(["schedules", "add", "ping", "p", "--every", "30", *common]) == 0
    capsys.readouterr()

    assert main(["schedules", "list", "--json", *common]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert listed["nightly"]["args"] == ["full"] and listed["nightly"]["priority"] == 0
    assert listed["nightly"]["tz"] == "Asia/Tokyo" and listed["ping"]["every_s"] == 30

    assert main(["schedules", "pause", "ping", *common]) == 0
    assert "schedule ping: paused" in capsys.readouterr().out
    assert main(["schedules", "list", *common]) == 0
    table = capsys.readouterr().out
    assert "every 30s" in table and "cron 0 3 * * * (Asia/Tokyo)" in table
    assert r.zcard(keys.delayed("p")) == 0
    assert main(["schedules", "resume", "ping", *common]) == 0
    assert "resumed; next occurrence" in capsys.readouterr().out
    assert r.zcard(keys.delayed("p")) == 1

    assert main(["schedules", "remove", "ping", "--yes", *common]) == 0
    assert main(["schedules", "remove", "ping", "--yes", *common]) == 1
    assert "no such schedule" in capsys.readouterr().out
    assert [s.name for s in Schedules(r, keys=keys).all()] == ["nightly"]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bad name", "t", "--every", "5"], "invalid schedule name"),
        (["n", "t", "--cron", "* * *"], "invalid cron expression"),
        (["n", "t", "--every", "0"], "every must be a finite number of seconds > 0"),
        (["n", "t", "--cron", "* * * * *", "--tz", "Nowhere/Land"], "unknown time zone"),
        (["n", "t", "--every", "5", "--args", "{"], "--args is not valid JSON"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    redis_url: str,
    r: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    code = main(["schedules", "add", *argv, "--redis-url", redis_url])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert r.keys("*") == []


@pytest.mark.integration
def test_taskscale_schedule_uses_the_default_producers_redis(
    redis_url: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    import taskscale
    from taskscale import producer

    monkeypatch.setenv("TASKSCALE_REDIS_URL", redis_url)
    monkeypatch.setenv("TASKSCALE_NAMESPACE", "other")
    monkeypatch.setattr(producer, "_default", None)  # built from the environment above
    try:
        info = taskscale.schedule(
            "hourly",
            "report",
            7,
            cron="0 * * * *",
            options=taskscale.TaskOptions(timeout=5),
            name="kw",
        )
    finally:
        default = producer._default
        if default is not None:
            default.redis.close()
    assert info.task["args"] == [7] and info.task["kwargs"] == {"name": "kw"}
    assert info.task["timeout_ms"] == 5000  # the task's own options apply to what is unset
    assert "max_retries" not in info.task
    stored = Schedules(r, keys=Keys("other")).get("hourly")
    assert stored is not None and stored.next_ms == info.next_ms and stored.next_ms % 3600_000 == 0
