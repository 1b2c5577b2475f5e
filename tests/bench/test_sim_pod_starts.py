"""Issue 26 item 5 on the benchmark traces (bench/simulate.py, its 9 seeds):
taskscale starts no more pods than the KEDA-like baseline (median) while
keeping both leads it had before the drain cap (rules/stabilization.py):
49 % fewer replica-seconds and a p99 queue wait 0.27x the baseline's."""

from __future__ import annotations

import statistics

from bench.sim_trace import make_trace
from bench.sim_world import WorldSettings
from bench.simulate import BASELINE, OURS, THREADS, VARIANTS, RunResult, run

SEEDS = range(9)  # bench.simulate's default seeds


def results(name: str) -> list[RunResult]:
    world = WorldSettings(threads_per_pod=THREADS)
    return [run(make_trace(seed), VARIANTS[name](), world)[0] for seed in SEEDS]


def test_pod_starts_at_most_the_baselines_with_both_leads_kept() -> None:
    ours, base = results(OURS), results(BASELINE)
    starts = statistics.median(r.pod_starts for r in ours)
    assert starts <= statistics.median(r.pod_starts for r in base)
    saved = statistics.median(
        1 - o.replica_seconds / b.replica_seconds for o, b in zip(ours, base, strict=True)
    )
    assert saved >= 0.49
    p99_ratio = statistics.median(
        o.wait_p99_s / b.wait_p99_s for o, b in zip(ours, base, strict=True)
    )
    assert p99_ratio <= 0.27
    assert sum(r.interrupted for r in ours) == 0  # what the busy hold guarantees, still
