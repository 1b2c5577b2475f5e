"""bench/simulate.py's latency-target mode (``--latency-target``) on short
traces: every policy's row has its pod starts, and the queue-wait target
lowers the wait where ``tasksPerReplica`` overstates what a pod runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import simulate
from bench.sim_trace import Arrival, Trace, TraceSettings
from bench.sim_world import WorldSettings

TARGET_S = 5.0
COARSE = f"taskscale, tasksPerReplica {4 * simulate.THREADS}"


def steady(rate_per_s: float, service_s: float, duration_s: float) -> Trace:
    """``rate_per_s`` tasks a second of ``service_s`` each: 8 s tasks at 1/s keep
    8 threads busy, two pods of 4 -- which ``tasksPerReplica`` 16 reads as half
    of one pod, so the count rule lets a queue build up."""
    count = int(rate_per_s * duration_s)
    arrivals = tuple(Arrival(i / rate_per_s, i / rate_per_s, service_s) for i in range(count))
    return Trace(
        seed=0, arrivals=arrivals, segments=(), settings=TraceSettings(duration_s=duration_s)
    )


def test_the_latency_rows_run_and_the_target_lowers_the_wait_of_a_coarse_tasks_per_replica() -> (
    None
):
    variants = {**simulate.VARIANTS, **simulate.latency_variants(TARGET_S)}
    assert set(simulate.latency_variants(TARGET_S)) == {
        f"taskscale, maxQueueWait {TARGET_S:g} s",
        COARSE,
        f"{COARSE}, maxQueueWait {TARGET_S:g} s",
    }
    trace = steady(1.0, 8.0, 200.0)
    world = WorldSettings(threads_per_pod=simulate.THREADS, tail_s=120.0)
    results = {name: [simulate.run(trace, make(), world)[0]] for name, make in variants.items()}

    for name, (result,) in results.items():
        assert result.tasks == 200 and result.never_claimed == 0, name
        assert result.pod_starts >= 1, name  # every policy started pods, and says how many
    table = simulate.report(results, per_seed=tuple(results))
    for name, (result,) in results.items():
        assert f"| {name} | 0 | 200 |" in table
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} | 0 |"))
        assert row.split("|")[9].strip() == str(result.pod_starts)  # the pod starts column

    (coarse,) = results[COARSE]
    (targeted,) = results[f"{COARSE}, maxQueueWait {TARGET_S:g} s"]
    assert targeted.wait_p50_s < coarse.wait_p50_s
    assert targeted.wait_p99_s < coarse.wait_p99_s
    assert targeted.pod_starts > coarse.pod_starts  # it got there by adding pods


def test_the_command_line_runs_the_latency_rows_and_writes_their_pod_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate, "time_decide", lambda: [0.001])  # 1000 types: not this test's
    out = tmp_path / "runs.json"
    argv = ["--seeds", "1", "--duration", "300", "--no-plot", "--json", str(out)]
    assert simulate.main([*argv, "--latency-target", "30"]) == 0
    runs = json.loads(out.read_text())
    assert set(simulate.latency_variants(30.0)) <= set(runs)
    assert set(simulate.VARIANTS) <= set(runs)
    for name, rows in runs.items():
        assert [r["seed"] for r in rows] == [0], name
        assert isinstance(rows[0]["pod_starts"], int), name
    printed = capsys.readouterr().out.splitlines()
    line = next(x for x in printed if x.startswith(f"[{COARSE}, maxQueueWait 30 s] "))
    assert "vs KEDA-like" in line and "pod starts median" in line
