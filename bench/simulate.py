"""Scaling simulation: taskscale's policy vs a KEDA-like baseline.

Both autoscalers face the same bursty trace (Poisson bursts, trickles,
lulls, and scheduled batches enqueued as delayed tasks ten minutes ahead) on
the same simulated pods (4 threads, 5-10 s start-up).  taskscale runs its
real policy code (``taskscale.controller.policy.decide``); the baseline
models KEDA's Redis-list scaler and the HPA with their defaults (see
``bench/sim_scalers.py``).  Reported per scaler, median over seeds: queue
wait p50 / p99, replica-seconds, tasks interrupted by scale-down, pod starts
(scale churn: every pod created pays its start-up), and cold starts: how
many times work found no pod at all, and the median and longest time from
that work to a first task running.

    .venv/bin/python -m bench.simulate                 # 9 seeds, plot to docs/img
    .venv/bin/python -m bench.simulate --seeds 3 --json out.json
    .venv/bin/python -m bench.simulate --latency-target 30 --no-plot

``--latency-target S`` adds the queue-wait target (``maxQueueWaitSeconds: S``)
to taskscale's settings, and runs it twice more with ``tasksPerReplica``
overstated 4x (16 on pods that run 4 at once, as with CPU-bound threads):
once without the target and once with it -- the case a count of tasks gets
wrong and the oldest task's age does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from bench.sim_scalers import KedaScaler, KedaSettings, TaskscaleScaler
from bench.sim_trace import Trace, TraceSettings, make_trace
from bench.sim_world import TASK_TYPE, Series, World, WorldSettings
from taskscale.controller.policy import History, decide
from taskscale.controller.types import Observation, ScalingPolicy, TypeObservation, TypePolicy

MAX_REPLICAS = 30
THREADS = 4

#: taskscale's settings for this workload -- what a user would write in the
#: TaskScaler: one replica per 4 tasks (its thread count), idle after 60 s,
#: the default 60 s scale-down window, 30 s warm-up lead and 60 s rate window.
TASKSCALE_POLICY = ScalingPolicy(
    types=(TypePolicy(TASK_TYPE, idle_threshold_s=60.0),),
    tasks_per_replica=THREADS,
    min_replicas=0,
    max_replicas=MAX_REPLICAS,
    scale_up_stabilization_s=0.0,
    scale_down_stabilization_s=60.0,
    warmup_lead_s=15.0,
    rate_window_s=60.0,
)
#: KEDA with its defaults; the list-length target equals the thread count.
KEDA_SETTINGS = KedaSettings(list_length=THREADS, max_replicas=MAX_REPLICAS)

OURS, BASELINE = "taskscale", "KEDA-like"
#: Sensitivity rows: taskscale untuned (every setting at its default) and a
#: KEDA user who trades replicas for wait with a list-length target of 1.
VARIANTS: dict[str, Callable[[], Scaler]] = {
    OURS: lambda: TaskscaleScaler(TASKSCALE_POLICY, name=OURS),
    BASELINE: lambda: KedaScaler(KEDA_SETTINGS, name=BASELINE),
    "taskscale, defaults": lambda: TaskscaleScaler(
        ScalingPolicy(
            types=(TypePolicy(TASK_TYPE),),
            tasks_per_replica=THREADS,
            max_replicas=MAX_REPLICAS,
        ),
        name="taskscale, defaults",
    ),
    "KEDA-like, listLength 1": lambda: KedaScaler(
        replace(KEDA_SETTINGS, list_length=1), name="KEDA-like, listLength 1"
    ),
}


def latency_variants(target_s: float) -> dict[str, Callable[[], Scaler]]:
    """The queue-wait target's rows: on the tuned settings, and with
    ``tasksPerReplica`` overstated 4x without and with the target."""

    def with_target(policy: ScalingPolicy) -> ScalingPolicy:
        types = tuple(replace(t, max_queue_wait_s=target_s) for t in policy.types)
        return replace(policy, types=types)

    overstated = replace(TASKSCALE_POLICY, tasks_per_replica=4 * THREADS)
    names = (
        f"taskscale, maxQueueWait {target_s:g} s",
        f"taskscale, tasksPerReplica {4 * THREADS}",
        f"taskscale, tasksPerReplica {4 * THREADS}, maxQueueWait {target_s:g} s",
    )
    policies = (with_target(TASKSCALE_POLICY), overstated, with_target(overstated))
    return {
        name: (lambda p=policy, n=name: TaskscaleScaler(p, name=n))
        for name, policy in zip(names, policies, strict=True)
    }


class Scaler(Protocol):
    name: str

    def tick(self, world: World, t: float) -> None: ...


@dataclass(frozen=True)
class RunResult:
    scaler: str
    seed: int
    tasks: int
    wait_p50_s: float
    wait_p99_s: float
    wait_max_s: float
    replica_seconds: float
    interrupted: int
    never_claimed: int
    pod_starts: int
    cold_starts: int = 0  #: times work found zero pods
    cold_start_p50_s: float = 0.0  #: work at zero pods -> first task running, median
    cold_start_max_s: float = 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def run(trace: Trace, scaler: Scaler, settings: WorldSettings) -> tuple[RunResult, Series]:
    """Play ``trace`` against ``scaler`` from empty to the end of the tail."""
    world = World(trace, settings, seed=trace.seed)
    end = trace.settings.duration_s + settings.tail_s
    for i in range(round(end / settings.step_s) + 1):
        t = i * settings.step_s
        world.advance(t)
        scaler.tick(world, t)
    censored = world.unclaimed_waits(end)
    waits = world.waits + censored
    result = RunResult(
        scaler=scaler.name,
        seed=trace.seed,
        tasks=len(trace.arrivals),
        wait_p50_s=percentile(waits, 50),
        wait_p99_s=percentile(waits, 99),
        wait_max_s=max(waits),
        replica_seconds=world.replica_seconds,
        interrupted=world.interrupted,
        never_claimed=len(censored),
        pod_starts=world.pod_starts,
        cold_starts=len(world.cold_starts),
        cold_start_p50_s=statistics.median(world.cold_starts) if world.cold_starts else 0.0,
        cold_start_max_s=max(world.cold_starts, default=0.0),
    )
    return result, world.series


def _median(results: list[RunResult], attr: str) -> float:
    return statistics.median(float(getattr(r, attr)) for r in results)


def report(results: dict[str, list[RunResult]], *, per_seed: Sequence[str]) -> str:
    """A markdown table: per-seed rows of the ``per_seed`` scalers, then medians."""
    lines = [
        "| scaler | seed | tasks | wait p50 s | wait p99 s | wait max s | replica-s "
        "| interrupted | pod starts | cold starts | cold start p50 s | cold start max s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in per_seed:
        for r in results[name]:
            lines.append(
                f"| {name} | {r.seed} | {r.tasks} | {r.wait_p50_s:.1f} | {r.wait_p99_s:.1f} "
                f"| {r.wait_max_s:.1f} | {r.replica_seconds:.0f} | {r.interrupted} "
                f"| {r.pod_starts} | {r.cold_starts} | {r.cold_start_p50_s:.1f} "
                f"| {r.cold_start_max_s:.1f} |"
            )
    for name, rows in results.items():
        lines.append(
            f"| **{name} median** | | {_median(rows, 'tasks'):.0f} "
            f"| {_median(rows, 'wait_p50_s'):.1f} | {_median(rows, 'wait_p99_s'):.1f} "
            f"| {_median(rows, 'wait_max_s'):.1f} | {_median(rows, 'replica_seconds'):.0f} "
            f"| {_median(rows, 'interrupted'):.0f} | {_median(rows, 'pod_starts'):.0f} "
            f"| {_median(rows, 'cold_starts'):.0f} | {_median(rows, 'cold_start_p50_s'):.1f} "
            f"| {_median(rows, 'cold_start_max_s'):.1f} |"
        )
    return "\n".join(lines)


def comparison(ours: list[RunResult], base: list[RunResult]) -> str:
    """Per-seed replica-second savings and p99 ratio of ``ours`` against ``base``."""
    savings = [1 - o.replica_seconds / b.replica_seconds for o, b in zip(ours, base, strict=True)]
    p99_ratio = [
        o.wait_p99_s / b.wait_p99_s if b.wait_p99_s else float("inf")
        for o, b in zip(ours, base, strict=True)
    ]
    a, b = ours[0].scaler, base[0].scaler
    return (
        f"{a} vs {b}: replica-seconds saved median {statistics.median(savings):.0%} "
        f"(per seed: {', '.join(f'{s:.0%}' for s in savings)}); "
        f"p99 wait ratio median {statistics.median(p99_ratio):.2f} "
        f"(per seed: {', '.join(f'{x:.2f}' for x in p99_ratio)}); "
        f"tasks interrupted over all seeds: {a} {sum(o.interrupted for o in ours)}, "
        f"{b} {sum(r.interrupted for r in base)}; pod starts median: "
        f"{statistics.median(o.pod_starts for o in ours):.0f} vs "
        f"{statistics.median(r.pod_starts for r in base):.0f}"
    )


def time_decide(*, types: int = 1000, rounds: int = 5, calls: int = 200) -> list[float]:
    """Seconds per decide() for ``types`` task types with a full minute of
    history behind it (1 s polls): the median call time of each round."""
    policy = ScalingPolicy(
        types=tuple(TypePolicy(f"type-{i}") for i in range(types)),
        tasks_per_replica=THREADS,
        max_replicas=1000,
    )
    history = History.for_policy(policy)

    def observe(t: float) -> Observation:
        n = int(t)
        return Observation(
            at=t,
            types={
                tp.name: TypeObservation(
                    tp.name,
                    queued=i % 7,
                    active=i % 3,
                    idle_since=t - 1,
                    claimed_total=n * (i % 5),
                    completed_total=n * (i % 5),
                    service_ms_total=n * (i % 5) * 800,
                )
                for i, tp in enumerate(policy.types)
            },
        )

    t = 1_000_000.0
    for _ in range(90):  # fill the windows
        t += 1
        obs = observe(t)
        history.record(t, obs, decide(obs, policy, history, now=t, current=10))
    obs = observe(t + 1)
    medians = []
    for _ in range(rounds):
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            decide(obs, policy, history, now=t + 1, current=10)
            times.append(time.perf_counter() - started)
        medians.append(statistics.median(times))
    return medians


def plot(trace: Trace, series: dict[str, Series], path: Path) -> None:
    """Load, queue length and replicas over time for one seed, both scalers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    bin_s = 10.0
    bins = [0] * (int((trace.settings.duration_s + WorldSettings().tail_s) / bin_s) + 1)
    for a in trace.arrivals:
        bins[int(a.ready_at / bin_s)] += 1
    axes[0].bar(
        [i * bin_s / 60 for i in range(len(bins))],
        [n / bin_s for n in bins],
        width=bin_s / 60,
        color="0.5",
    )
    axes[0].set_ylabel("tasks ready / s")
    axes[0].set_title(f"seed {trace.seed}: load (scheduled batches are the tall spikes)")
    colors = {OURS: "tab:blue", BASELINE: "tab:red"}
    for name, s in series.items():
        minutes = [t / 60 for t in s.t]
        axes[1].plot(minutes, s.queued, label=name, color=colors.get(name), lw=1)
        axes[2].step(minutes, s.replicas, where="post", label=name, color=colors.get(name), lw=1)
    axes[1].set_ylabel("tasks queued")
    axes[1].set_yscale("symlog", linthresh=10)
    axes[2].set_ylabel("replicas (incl. starting)")
    axes[2].set_xlabel("minutes")
    for ax in axes[1:]:
        ax.legend(loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate", description=__doc__)
    parser.add_argument("--seeds", type=int, default=9, help="number of seeds (0..n-1)")
    parser.add_argument("--duration", type=float, default=TraceSettings().duration_s)
    parser.add_argument("--plot", type=Path, default=Path("docs/img/simulation.png"))
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every run's numbers here")
    parser.add_argument(
        "--latency-target",
        type=float,
        metavar="S",
        help="also run the queue-wait target maxQueueWaitSeconds=S (see above)",
    )
    args = parser.parse_args(argv)

    variants = dict(VARIANTS)
    if args.latency_target is not None:
        variants.update(latency_variants(args.latency_target))
    world_settings = WorldSettings(threads_per_pod=THREADS)
    results: dict[str, list[RunResult]] = {name: [] for name in variants}
    decide_s = decisions = 0.0
    started = time.perf_counter()
    for seed in range(args.seeds):
        trace = make_trace(seed, TraceSettings(duration_s=args.duration))
        series: dict[str, Series] = {}
        for name, make in variants.items():
            scaler = make()
            result, series[name] = run(trace, scaler, world_settings)
            results[name].append(result)
            if isinstance(scaler, TaskscaleScaler):
                decide_s += scaler.decide_seconds
                decisions += scaler.decisions
        if seed == 0 and not args.no_plot:
            plot(trace, {OURS: series[OURS], BASELINE: series[BASELINE]}, args.plot)
    print(report(results, per_seed=(OURS, BASELINE)))
    print()
    print(comparison(results[OURS], results[BASELINE]))
    for name in variants:
        if name not in (OURS, BASELINE):
            print(f"[{name}] " + comparison(results[name], results[BASELINE]))
    print(
        f"decide() in the simulation (1 type): {decisions:.0f} calls, "
        f"mean {decide_s / max(decisions, 1) * 1e6:.0f} us; "
        f"simulation wall time {time.perf_counter() - started:.1f} s"
    )
    per_round = time_decide()
    print(
        "decide() with 1000 types and a full history: median "
        f"{statistics.median(per_round) * 1e3:.2f} ms per call "
        f"(round medians: {', '.join(f'{x * 1e3:.2f}' for x in per_round)} ms)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({k: [asdict(r) for r in v] for k, v in results.items()}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
