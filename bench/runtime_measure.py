"""The runtime benchmark's measurements, the same way for every system:
enqueue, drain (with W worker processes) and delayed-task lateness, one
``Sample`` each, every run with every system interleaved."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from bench.peers.probe import INCR_KEY
from bench.runtime_probes import (
    ProbeTotals,
    cpu_per_task,
    percentile,
    read_lateness,
    redis_commandstats,
    redis_cpu,
    wait_for_count,
)
from bench.runtime_procs import Harness, groups_cpu
from bench.runtime_profile import profilers, under_profiler
from bench.runtime_settings import LATE_GRACE_S, PeerFailed, Sample, finite_ms, text
from taskscale.keys import Keys


def enqueue_parallel(h: Harness, peer: str, n: int, procs: int) -> dict[str, Any]:
    """Enqueue ``n`` tasks from ``procs`` children at once (issue 11 measures
    drains only; loading the queue faster leaves more time for them)."""
    if procs <= 1:
        return h.child(peer, "enqueue", "--n", str(n), timeout=60 + n / 1000)
    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    with ThreadPoolExecutor(procs) as pool:
        answers = list(
            pool.map(
                lambda k: h.child(peer, "enqueue", "--n", str(k), timeout=60 + n / 1000), shares
            )
        )
    seconds = max(a["seconds"] for a in answers)
    return {"n": n, "seconds": seconds, "rate": n / seconds}


def measure_drain(h: Harness, peer: str, workers: int, run: int) -> list[Sample]:
    """Enqueue N (one enqueue sample), then drain them with W workers."""
    n = h.n_for(peer) if h.settings.bodies else h.settings.n
    h.client.flushall()
    enq = enqueue_parallel(h, peer, n, h.settings.enqueue_procs)
    enqueue_sample = Sample(
        peer, "enqueue", run, True, n=n, rate=enq["rate"], seconds=enq["seconds"]
    )
    enqueue_sample.loadavg = os.getloadavg()
    h.client.config_resetstat()
    commands = worker_commands(h, peer, workers=workers, delayed=False)
    label = f"drain{workers}-{h.body}-r{run}"
    if h.settings.profile_dir is not None:
        h.settings.profile_dir.mkdir(parents=True, exist_ok=True)
        mode = "gil" if h.settings.profile_gil else "all"
        commands = [
            under_profiler(h, argv, h.settings.profile_dir / f"{peer}-{label}-{i}-{mode}.txt")
            for i, argv in enumerate(commands)
        ]
    spawned = time.time()
    with h.workers(peer, commands, label) as procs, profilers(h, procs):
        window = h.settings.drain_window
        timeout = 60 + window
        # CPU the workers (and Redis) spend per task once they run: taken
        # from the first poll that sees a finished task from every worker
        # process to the end, so start-up (imports) is left out -- a process
        # that started late used to add its imports to the figure (issue 27);
        # unlike a rate, not diluted by the other work sharing the machine.
        marks: list[tuple[ProbeTotals, float, float]] = []

        def first(seen: ProbeTotals) -> None:
            marks.append((seen, groups_cpu(procs), redis_cpu(h.client)))

        totals = wait_for_count(
            h.client,
            n,
            timeout=timeout,
            procs=procs,
            window=window,
            on_first=first,
            processes=workers,
        )
        cpu_end, redis_end = groups_cpu(procs), redis_cpu(h.client)
        done = time.time()
    seconds = totals.last - totals.first
    stats = redis_commandstats(h.client)
    drain = Sample(peer, "drain", run, True, workers=workers, n=totals.count, body=h.body)
    enqueue_sample.body = h.body
    drain.rate, drain.seconds = totals.count / seconds, seconds
    drain.loadavg = os.getloadavg()
    drain.extra = {
        # a system that did not finish within the window is measured over
        # the tasks it did finish (steady state), and says so
        "finished_all": totals.count >= n,
        "enqueued": n,
        "startup_s": totals.first - spawned,
        "spawn_to_done_s": done - spawned,
        "redis_usec_per_task": sum(s["usec"] for s in stats.values()) / totals.count,
        "redis_calls_per_task": sum(s["calls"] for s in stats.values()) / totals.count,
        "commandstats": stats,
        "worker_cpu_us_per_task": cpu_per_task(marks, totals, cpu_end, 1),
        "redis_cpu_us_per_task": cpu_per_task(marks, totals, redis_end, 2),
        # proof the body ran: one INCR per finished task (incr body)
        "incr_count": int(h.client.get(INCR_KEY) or 0),
    }
    return [enqueue_sample, drain]


def measure_lateness(h: Harness, peer: str, run: int) -> Sample:
    """The most worker processes of the drain runs (so a system whose single
    process can't keep up with the rate gets its best chance); schedule
    rate x seconds delayed tasks; p50/p99 of start minus due."""
    s = h.settings
    count = int(s.late_rate * s.late_seconds)
    lead = 3.0 + count / 800  # the slowest scheduler seen writes ~1k/s on a busy machine
    h.client.flushall()
    workers = max(s.workers)
    commands = worker_commands(h, peer, workers=workers, delayed=True)
    with h.workers(peer, commands, f"late-r{run}") as procs:
        warm = 10
        h.child(peer, "enqueue", "--n", str(warm), timeout=60)
        wait_for_count(h.client, warm, timeout=60, procs=procs)
        time.sleep(1.0)  # let every worker thread / process settle
        sched = h.child(
            peer,
            "schedule",
            "--rate",
            str(s.late_rate),
            "--seconds",
            str(s.late_seconds),
            "--lead",
            str(lead),
            timeout=lead + 60,
        )
        remaining = sched["last_due"] - time.time()
        timeout = max(0.0, remaining) + LATE_GRACE_S
        error = ""
        try:
            wait_for_count(h.client, warm + count, timeout=timeout, procs=procs)
        except PeerFailed as exc:  # fell behind: keep what ran, say how much did not
            error = f"fell behind: {exc}"
    late = read_lateness(h.client)
    sample = Sample(peer, "lateness", run, not error, workers=workers, n=len(late), error=error)
    if peer == "taskscale":  # its own counters split lateness: due -> claim vs claim -> start
        stats = h.client.hgetall(Keys().stats("late"))
        sample.extra["taskscale_stats"] = {text(k): int(v) for k, v in stats.items()}
    sample.loadavg = os.getloadavg()
    # Tasks that never ran count as later than anything measured, so the
    # percentiles of a system that fell behind are lower bounds, not hidden.
    padded = late + [float("inf")] * (count - len(late))
    sample.extra |= {
        "p50_ms": finite_ms(percentile(padded, 50)),
        "p99_ms": finite_ms(percentile(padded, 99)),
        "max_ms": finite_ms(max(padded)),
        "min_ms": finite_ms(min(padded)),
        "ran": len(late),
        "scheduled": count,
        "scheduled_ahead_s": sched["ahead_of_first_due"],
        "schedule_rate": sched["n"] / sched["seconds"],
    }
    if sched["ahead_of_first_due"] < 0:
        sample.ok = False
        sample.error = "the schedule was still being written when the first task was due"
    return sample


def worker_commands(h: Harness, peer: str, *, workers: int, delayed: bool) -> list[list[str]]:
    """The argv lists a peer module gives for W workers (asked via a child)."""
    answer = h.child(
        peer,
        "commands",
        "--workers",
        str(workers),
        "--threads",
        str(h.settings.threads),
        "--bindir",
        h.bindir,
        *(["--delayed"] if delayed else []),
        timeout=60,
    )
    commands: list[list[str]] = answer["commands"]
    return commands


def guarded(peer: str, op: str, run: int, fn: Any, *args: Any) -> list[Sample]:
    """Run one measurement; a failure becomes a failed sample, not a crash."""
    try:
        result = fn(*args)
    except (PeerFailed, redis.RedisError, KeyError, ValueError, ZeroDivisionError) as exc:
        print(f"  {peer} {op} run {run}: FAILED: {exc}", file=sys.stderr)
        return [Sample(peer, op, run, False, error=str(exc), loadavg=os.getloadavg())]
    return result if isinstance(result, list) else [result]


def run_all(h: Harness) -> list[Sample]:
    """Every run, every system interleaved, so machine noise spreads evenly."""
    s = h.settings
    samples: list[Sample] = []
    for run in range(1, s.runs + 1):
        for body, peer in [(b, p) for b in s.bodies or ("empty",) for p in s.peers]:
            h.body = body
            if "drain" in s.ops:
                for w in s.workers:
                    got = guarded(peer, f"drain{w}", run, measure_drain, h, peer, w, run)
                    for sample in got:
                        sample.body = body
                        if sample.ok and sample.op == "drain":
                            key = (peer, body)
                            h.seen[key] = max(h.seen.get(key, 0.0), sample.rate)
                        if not sample.ok:
                            sample.workers = w
                    samples += got
                    report_progress(got)
            if "lateness" in s.ops and body == (s.bodies or ("empty",))[0]:
                got = guarded(peer, "lateness", run, measure_lateness, h, peer, run)
                samples += got
                report_progress(got)
    return samples


def report_progress(samples: Sequence[Sample]) -> None:
    for x in samples:
        if not x.ok:
            continue
        what = f"{x.op}{x.workers if x.op == 'drain' else ''}"
        what += f" {x.body}" if x.body != "empty" or x.op == "drain" else ""
        if x.op == "lateness":
            figure = f"p50 {x.extra['p50_ms']:.1f} ms  p99 {x.extra['p99_ms']:.1f} ms"
        else:
            figure = f"{x.rate:,.0f} tasks/s"
        load = "/".join(f"{v:.1f}" for v in x.loadavg)
        print(f"  run {x.run} {x.peer:15} {what:14} {figure}   (load {load})", flush=True)
