"""What the CLI prints (issue 26): a closed pipe ends quietly, times read in
units, a rate reads every unit spelling, retries are called retries, and a
paused schedule is not counted as a cancel."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import redis

from support.workers import run_taskscale, taskscale_process
from taskscale.cli import BROKEN_PIPE_EXIT
from taskscale.demo.load import rate as demo_rate
from taskscale.durations import span
from taskscale.keys import Keys
from taskscale.limits import parse_rate
from taskscale.producer import Producer
from taskscale.scheduling.schedules import Schedules, render


def closed_pipe(url: str, *argv: str) -> tuple[int, str]:
    """Run with stdout on a pipe whose reader is gone before the first write
    (``| head`` that stopped reading): exit code and stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = taskscale_process(url, *argv, stdout=write_end, stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.integration
def test_a_reader_that_went_away_ends_the_command_quietly(redis_url: str, r: redis.Redis) -> None:
    Producer(r, keys=Keys("taskscale")).enqueue("t", 1)
    for argv in (("status", "--json"), ("status",), ("schedules", "list"), ("--help",)):
        code, err = closed_pipe(redis_url, *argv)
        if argv == ("--help",):  # argparse prints and exits itself: no traceback either
            assert "Traceback" not in err, err
            continue
        assert (code, err) == (BROKEN_PIPE_EXIT, ""), argv


def test_span_reads_in_units() -> None:
    assert span(79029.2) == "21h57m"  # the nightly schedule of the issue
    assert [span(s) for s in (0, 4.25, 59.99, 60, 185, 3599, 3600, 86399)] == [
        "0.0s", "4.2s", "59.9s", "1m00s", "3m05s", "59m59s", "1h00m", "23h59m"
    ]  # fmt: skip
    assert [span(s) for s in (86400, 3 * 86400 + 4 * 3600 + 59)] == ["1d00h", "3d04h"]
    assert [span(s) for s in (-5, float("nan"), float("inf"))] == ["0.0s", "0.0s", "forever"]


def test_a_nightly_schedules_next_run_reads_in_hours() -> None:
    row = {"name": "nightly", "type": "t", "every_s": None, "cron": "0 3 * * *", "tz": None}
    row |= {"error": "", "paused": False, "next_ms": 1_000_079_029_200, "occurrences": 0}
    table = render([row], now_s=1_000_000_000.0)
    assert "in 21h57m" in table[1] and "79029" not in table[1]


def test_every_rate_unit_spelling_reads_alike() -> None:
    for unit in ("s", "sec", "second", "seconds", "S", "SEC"):
        assert parse_rate(f"100/{unit}") == (100, 1.0), unit
    for unit in ("m", "min", "minute", "minutes"):
        assert parse_rate(f"10/{unit}") == (10, 60.0), unit
    for unit in ("h", "hr", "hour", "hours", "Hour"):
        assert parse_rate(f"100/{unit}") == (100, 3600.0), unit
    assert parse_rate("5/2h") == (5, 7200.0)
    for bad in ("100/hourly", "100/fortnight", "100/", "/hour", "-1/hour", "1.5/s"):
        with pytest.raises(ValueError, match="100/hour"):
            parse_rate(bad)
    assert demo_rate("600/min") == 10.0 and demo_rate("2.5") == 2.5


@pytest.mark.integration
def test_limits_set_takes_a_rate_per_hour(redis_url: str) -> None:
    done = run_taskscale(redis_url, "limits", "set", "mail", "--rate", "100/hour")
    assert done.returncode == 0, done.stderr
    assert "rate 100/3600s" in done.stdout
    bad = run_taskscale(redis_url, "limits", "set", "mail", "--rate", "100/fortnight")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


@pytest.mark.integration
def test_outputs_call_the_retries_retries(redis_url: str, r: redis.Redis) -> None:
    keys = Keys("taskscale")
    env = {"id": "x1", "type": "t", "args": [], "kwargs": {}, "attempts": 3, "max_retries": 3}
    record = {"envelope": json.dumps(env), "error": "E: boom", "failed_ms": 1, "traceback": ""}
    r.rpush(keys.dead("t"), json.dumps(record))
    r.zadd(keys.delayed("t"), {json.dumps(env | {"id": "x2", "attempts": 1}): 1})
    dead = run_taskscale(redis_url, "dead", "list", "t").stdout
    delayed = run_taskscale(redis_url, "delayed", "list", "t").stdout
    assert "retries 3" in dead and "retries 1" in delayed
    assert "attempts" not in dead + delayed


@pytest.mark.integration
def test_pausing_a_schedule_withdraws_its_run_and_cancels_nothing(r: redis.Redis) -> None:
    keys = Keys("taskscale")
    schedules = Schedules(r, keys=keys)
    schedules.add("nightly", "t", cron="0 3 * * *")
    assert r.zcard(keys.delayed("t")) == 1
    assert schedules.pause("nightly") == "done"
    assert r.zcard(keys.delayed("t")) == 0
    stats = r.hgetall(keys.stats("t"))
    assert stats.get(b"withdrawn") == b"1" and b"cancelled" not in stats
    schedules.resume("nightly")
    assert schedules.remove("nightly") == "done"
    assert r.hget(keys.stats("t"), "withdrawn") == b"2"
