"""``taskscale demo`` runs the whole loop on one machine, ends by itself,
writes its plot, reports what it measured, and leaves nothing running."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskscale.demo.run import (
    Arrivals,
    DemoSettings,
    ScaleEvent,
    plan_load,
    scale_ups_from_zero,
)


def demo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "taskscale.cli", "demo", *args]


def child_pids(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc), excluding zombies."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.integration
def test_short_demo_scales_up_and_back_to_zero_and_writes_a_plot(tmp_path: Path) -> None:
    out = tmp_path / "tmp.svg"
    logs = tmp_path / "logs"

    done = subprocess.run(
        demo_command(
            *("--duration", "20", "--idle-threshold", "3", "--out", str(out)),
            *("--log-format", "json", "--log-dir", str(logs)),
        ),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_text().startswith("<svg ")
    assert out.read_text().count("<polyline") == 5  # queue, active, upcoming, replicas, desired
    peak = re.search(r"Replicas peaked at (\d+) and ended at (\d+)", done.stdout)
    assert peak is not None, done.stdout[-2000:]
    assert int(peak.group(1)) > 0
    assert int(peak.group(2)) == 0
    enqueued = re.search(r"(\d+) tasks were enqueued .* and (\d+) completed", done.stdout)
    assert enqueued is not None
    assert int(enqueued.group(1)) > 0 and int(enqueued.group(2)) > 0
    # decision time and decision-to-first-task, as two figures (issue 26)
    assert re.search(r"decided to start workers [\d., ]+ s after new work", done.stdout)
    first = re.search(r"The first task then ran ([\d.]+)", done.stdout)
    assert first is not None and float(first.group(1)) > 0, done.stdout[-2000:]
    # --log-format reaches the workers: JSON lines, each naming its worker
    records = [json.loads(line) for f in logs.glob("*.log") for line in f.read_text().splitlines()]
    serving = [r for r in records if "serving" in r["message"]]
    assert serving and all(r["worker_id"] in r["message"] for r in serving)
    for line in done.stderr.splitlines():  # the demo's own log lines, if any
        json.loads(line)


@pytest.mark.slow
@pytest.mark.integration
def test_ctrl_c_stops_workers_and_redis_and_leaves_no_process(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        demo_command("--duration", "120", "--out", str(tmp_path / "x.svg")),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        # Wait (bounded) until the table runs and some workers exist.
        deadline = time.monotonic() + 90
        descendants: set[int] = set()
        while time.monotonic() < deadline and len(descendants) < 2:
            time.sleep(0.5)
            descendants = child_pids(demo.pid)  # redis-server + workers
        assert len(descendants) >= 2, "no redis-server and worker children appeared"

        demo.send_signal(signal.SIGINT)
        output, _ = demo.communicate(timeout=90)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()

    assert demo.returncode == 130, output[-2000:]
    assert "Interrupted" in output
    assert not [pid for pid in descendants if alive(pid)]


def test_the_load_plan_ends_early_enough_to_settle_back_to_zero() -> None:
    settings = DemoSettings(duration_s=75)

    plan = plan_load(settings)

    last_work = max(plan.spike.due_at_s, *(b.end_s for b in plan.bursts))
    assert last_work <= settings.duration_s - settings.settle_s
    assert plan.spike.due_at_s - settings.warmup_lead_s > plan.bursts[0].end_s


def test_a_duration_too_short_to_settle_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        plan_load(DemoSettings(duration_s=10))


def test_scale_ups_from_zero_split_into_lookahead_starts_and_reactions_to_new_work() -> None:
    t0 = 1000.0
    events = [
        ScaleEvent(t0 + 1.0, 0, 6, "Lookahead"),  # nothing ready yet: the look-ahead
        ScaleEvent(t0 + 10.0, 6, 0, "Idle"),
        ScaleEvent(t0 + 12.5, 0, 3, "Demand"),  # 0.5 s after the task at 12.0
        ScaleEvent(t0 + 13.0, 3, 4, "Demand"),  # not from zero
    ]
    arrivals = Arrivals(ready=[(5.0, 10), (12.0, 4), (12.2, 8)])

    reactions, lookahead = scale_ups_from_zero(events, arrivals, t0)

    assert lookahead == 1
    assert reactions == [pytest.approx(0.5)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--duration", "nan"], "argument --duration: 'nan' must be a finite number"),
        (["--duration", "inf"], "argument --duration: 'inf' must be a finite number"),
        (["--threads", "0"], "argument --threads: '0' must be at least 1"),
        (["--max-replicas", "-1"], "argument --max-replicas: '-1' must be at least 1"),
        (["--max-replicas", "100000"], "argument --max-replicas: '100000' must be at most"),
        (["--rate", "nan"], "argument --rate: 'nan' must be a number of tasks per second"),
        (["--rate", "-2"], "argument --rate: '-2' must be a number of tasks per second"),
        (["--idle-threshold", "-1"], "argument --idle-threshold: '-1' must be a finite"),
        (["--idle-threshold", "nan"], "argument --idle-threshold: 'nan' must be a finite"),
        (["--warmup-lead", "-3"], "argument --warmup-lead: '-3' must be a finite"),
        (["--warmup-lead", "inf"], "argument --warmup-lead: 'inf' must be a finite"),
        (["--namespace", "a b"], "taskscale demo: invalid namespace 'a b'"),
        (["--redis-url", "foo://x"], "taskscale demo: invalid Redis URL 'foo://x'"),
        (["--redis-url", "redis+cluster://h:1"], "the demo needs one Redis server"),
        (["--out", "."], "taskscale demo: --out '.' is a directory"),
    ],
)
def test_bad_demo_flags_are_one_sentence_before_anything_starts(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    from taskscale.cli import main

    try:
        code = main(["demo", *argv])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err and "convert" not in err and "OverflowError" not in err


def test_the_demo_policy_is_validated_like_a_taskscaler() -> None:
    from taskscale.controller.types import validate_policy

    validate_policy(DemoSettings().policy())  # the defaults are a valid policy
    for bad in (DemoSettings(warmup_lead_s=math.nan), DemoSettings(idle_threshold_s=-1.0)):
        with pytest.raises(ValueError, match="must be a finite number >= 0"):
            validate_policy(bad.policy())


def test_a_plot_that_cannot_be_written_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from taskscale.demo.plot import write_plot
    from taskscale.demo.report import RunResult, Sample

    (tmp_path / "file").write_text("not a directory")
    settings = DemoSettings(out=tmp_path / "file" / "demo.svg")
    samples = [Sample(float(t), 0, 0, 0, 0, 0, 0, "-") for t in range(3)]
    result = RunResult(samples, Arrivals(), 0, 0, 0, [], 0, False, tmp_path)
    write_plot(result, plan_load(settings), settings)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"no plot: cannot write {str(settings.out)!r}: ")
