"""Reconcile time for 1000 task types: observe (one Lua round trip) + decide.

Why: the controller promises that one poll reads every type of every scaler
on a Redis in one round trip and decides in well under the poll interval
(goal: < 20 ms for 1000 types).  This measures it on a real redis-server
with realistic data per type (ready tasks at several priority levels,
delayed tasks around now, counters, active/idle, a registry of workers),
and measures side by side, in the same run and on the same Redis, the
design it replaced: a plain pipeline (which needs a second round trip for
the worker records, and takes the controller's clock for the delayed
counts).  Both variants are interleaved so background load hits them alike.

Besides wall time it records CPU time per pass -- this process's
(observe + decide) and Redis's main thread's (INFO cpu before and after) --
because on a shared, loaded machine wall time mostly measures waiting for a
core; the CPU sum is what a pass costs on an idle one (plus loopback latency).

Run: ``.venv/bin/python -m bench.reconcile_bench [--types 1000]
[--iterations 200] [--runs 5] [--busy-fraction 1.0] [--levels spread]
[--peer-every 4] [--queue-wait S] [--json out.json]``.  The observer is asked
as the reconcile pass asks it: the oldest ready task is decoded every pass
only for types with a queue-wait target (``--queue-wait``: all of them),
for the others every 10 s.  Prints medians and p99s per run and the
median over runs.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.policy import History, decide
from taskscale.controller.types import (
    Observation,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
)
from taskscale.demo.localredis import LocalRedis
from taskscale.keys import DEFAULT_PRIORITY, PRIORITY_LEVELS, Keys

LEAD_S = 30.0


@dataclass(frozen=True)
class Layout:
    """How the types are split among scalers (1 x 1000, or 100 x 10, ...)."""

    name: str
    scalers: int
    types_per_scaler: int

    #: maxQueueWaitSeconds of every type (None: no queue-wait target).
    queue_wait_s: float | None = None

    def policies(self) -> dict[str, ScalingPolicy]:
        wait = self.queue_wait_s
        return {
            f"scaler{s}": ScalingPolicy(
                types=tuple(
                    TypePolicy(
                        f"t{s * self.types_per_scaler + i}",
                        idle_threshold_s=60,
                        max_queue_wait_s=wait,
                    )
                    for i in range(self.types_per_scaler)
                ),
                tasks_per_replica=4,
                max_replicas=50,
                warmup_lead_s=LEAD_S,
            )
            for s in range(self.scalers)
        }


def populate(
    client: redis.Redis,
    keys: Keys,
    n_types: int,
    *,
    busy_fraction: float = 1.0,
    spread_levels: bool = True,
    seed: int = 1,
) -> None:
    """Data for n_types types per docs/schema.md, written in a few pipelines.

    A busy type has ready tasks (at 3 random priority levels with
    ``spread_levels``, the observer's worst case; else at the default level
    only), 8 delayed tasks around now, tasks active and counters; the others
    (1 - busy_fraction of them) only have counters and an IDLE_SINCE, like a
    type that ran earlier.
    """
    rng = random.Random(seed)
    seconds, micros = client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    pipe = client.pipeline(transaction=False)
    for i in range(n_types):
        t = f"t{i}"
        counters: dict[Any, Any] = {"enqueued": 1000 + i, "claimed": 990, "completed": 980}
        counters.update(failed=3, service_ms=98_000, wait_ms=4_000)
        pipe.hset(keys.stats(t), mapping=dict(counters))
        pipe.hset(keys.idle_since, t, f"{now_ms / 1000 - rng.randint(0, 600):.3f}")
        if i % 500 == 499:
            pipe.execute()
        if i >= busy_fraction * n_types:
            continue
        levels = rng.sample(range(PRIORITY_LEVELS), 3) if spread_levels else [DEFAULT_PRIORITY]
        for p in levels:
            tasks = [f'{{"id":"{t}-{p}-{k}"}}' for k in range(rng.randint(1, 5))]
            pipe.rpush(keys.queue(t, p), *tasks)
            pipe.hincrby(keys.queued, t, len(tasks))  # as a counting producer does
        due = {f'{{"id":"{t}-d{k}"}}': now_ms + rng.randint(-10_000, 120_000) for k in range(8)}
        pipe.zadd(keys.delayed(t), dict(due))
        pipe.hset(keys.active, t, rng.randint(0, 6))
    for w in range(max(1, n_types // 10)):
        wid = f"worker{w}"
        pipe.zadd(keys.workers, {wid: now_ms + 3_600_000})
        record: dict[Any, Any] = {"id": wid, "pod": f"pod{w}", "threads": 4}
        record.update(types=f"t{w * 10},t{w * 10 + 1}", busy=w % 5)
        pipe.hset(keys.worker(wid), mapping=record)
    pipe.execute()


class PipelineObserver:
    """The peer design: a plain pipeline of per-key reads (two round trips:
    the worker records can only be fetched once their ids are known; the
    delayed counts use the controller's clock, not Redis's)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys

    def observe(self, requests: Mapping[str, ObserveRequest]) -> dict[str, Observation]:
        types = list(dict.fromkeys(t for r in requests.values() for t in r.types))
        now_ms = int(time.time() * 1000)
        lead_ms = int(max(r.lead_s for r in requests.values()) * 1000)
        k = self._keys
        pipe = self._client.pipeline(transaction=False)
        pipe.time()
        pipe.hmget(k.active, types)
        pipe.hmget(k.idle_since, types)
        for t in types:
            for q in k.queues(t):
                pipe.llen(q)
            pipe.zcount(k.delayed(t), "-inf", now_ms)
            pipe.zcount(k.delayed(t), f"({now_ms}", now_ms + lead_ms)
            pipe.hmget(
                k.stats(t), ["enqueued", "claimed", "completed", "failed", "service_ms", "wait_ms"]
            )
        pipe.zrangebyscore(k.workers, now_ms, "+inf")
        reply = pipe.execute()
        (sec, usec), active, idle, rest = reply[0], reply[1], reply[2], reply[3:]
        per = PRIORITY_LEVELS + 3
        by_type: dict[str, TypeObservation] = {}
        for i, t in enumerate(types):
            row = rest[i * per : (i + 1) * per]
            c = [int(v or 0) for v in row[PRIORITY_LEVELS + 2]]
            by_type[t] = TypeObservation(
                task_type=t,
                queued=sum(row[:PRIORITY_LEVELS]),
                due=row[PRIORITY_LEVELS],
                upcoming=row[PRIORITY_LEVELS + 1],
                active=int(active[i] or 0),
                idle_since=None if idle[i] is None else float(idle[i]),
                enqueued_total=c[0],
                claimed_total=c[1],
                completed_total=c[2],
                failed_total=c[3],
                service_ms_total=c[4],
                wait_ms_total=c[5],
            )
        ids = rest[-1]
        pipe = self._client.pipeline(transaction=False)
        for wid in ids:
            pipe.hmget(k.worker(wid.decode()), ["pod", "types", "threads", "busy"])
        workers = [
            WorkerObservation(
                wid.decode(), pod.decode(), tuple(ts.decode().split(",")), int(th), int(b)
            )
            for wid, (pod, ts, th, b) in zip(ids, pipe.execute(), strict=True)
            if ts is not None
        ]
        at = int(sec) + int(usec) / 1e6
        return {
            name: Observation(
                at=at,
                types={t: by_type[t] for t in r.types},
                workers=tuple(w for w in workers if set(w.types) & set(r.types)),
            )
            for name, r in requests.items()
        }


Observe = Callable[[Mapping[str, ObserveRequest]], dict[str, Observation]]


def one_pass(
    observe: Observe,
    requests: Mapping[str, ObserveRequest],
    policies: Mapping[str, ScalingPolicy],
    histories: Mapping[str, History],
    probe: redis.Redis,
) -> dict[str, float]:
    """One reconcile of every scaler, in seconds: wall time of observe, decide
    and both; CPU time of this process (observe + decide) and of Redis's main
    thread (read with INFO before and after, outside the timed region)."""
    redis_cpu_0 = _redis_cpu_s(probe)
    cpu_0 = time.process_time()
    t0 = time.perf_counter()
    observations = observe(requests)
    t1 = time.perf_counter()
    now = time.time()
    for name, policy in policies.items():
        decision = decide(observations[name], policy, histories[name], now=now, current=2)
        histories[name].record(now, observations[name], decision)
    t2 = time.perf_counter()
    cpu = time.process_time() - cpu_0
    redis_cpu = _redis_cpu_s(probe) - redis_cpu_0
    return {
        "observe": t1 - t0,
        "decide": t2 - t1,
        "total": t2 - t0,
        "client_cpu": cpu,
        "redis_cpu": redis_cpu,
        "cpu": cpu + redis_cpu,
    }


def _redis_cpu_s(probe: redis.Redis) -> float:
    info = probe.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_layout(
    client: redis.Redis, keys: Keys, layout: Layout, iterations: int, *, peer_every: int = 1
) -> dict[str, dict[str, float]]:
    """Median and p99 of each part over ``iterations`` passes of the Lua
    observer, and of the pipeline peer on every ``peer_every``-th pass
    (interleaved, so both see the same background load)."""
    policies = layout.policies()
    requests = {  # as the reconcile pass asks
        n: ObserveRequest(p.type_names(), p.warmup_lead_s, ages=p.queue_wait_types())
        for n, p in policies.items()
    }
    variants: dict[str, Observe] = {
        "lua": Observer(client, keys).observe,
        "pipeline": PipelineObserver(client, keys).observe,
    }
    samples: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    histories = {v: {n: History.for_policy(p) for n, p in policies.items()} for v in variants}
    probe = redis.Redis(connection_pool=client.connection_pool)
    for v, observe in variants.items():  # warm-up: script load, connections
        one_pass(observe, requests, policies, histories[v], probe)
    for i in range(iterations):
        for v, observe in variants.items():
            if v != "lua" and i % peer_every:
                continue
            for part, seconds in one_pass(observe, requests, policies, histories[v], probe).items():
                samples[v].setdefault(part, []).append(seconds)
    return {
        v: {
            f"{part}_{stat}_ms": fn(values) * 1000
            for part, values in parts.items()
            for stat, fn in (("median", statistics.median), ("p99", lambda x: percentile(x, 0.99)))
        }
        for v, parts in samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--busy-fraction", type=float, default=1.0, help="share of types with work (default all)"
    )
    parser.add_argument(
        "--levels",
        choices=("spread", "default"),
        default="spread",
        help="busy types' ready tasks at 3 random priority levels, or the default level only",
    )
    parser.add_argument(
        "--peer-every", type=int, default=4, help="run the slow pipeline peer every Nth pass"
    )
    parser.add_argument(
        "--queue-wait",
        type=float,
        default=None,
        help="give every type this maxQueueWaitSeconds (its oldest ready task read every pass)",
    )
    parser.add_argument("--json", help="write the per-run results here")
    args = parser.parse_args(argv)
    wait = args.queue_wait
    layouts = [
        Layout(f"1 scaler x {args.types} types", 1, args.types, wait),
        Layout(f"{args.types // 10} scalers x 10 types", args.types // 10, 10, wait),
    ]
    # SIGTERM unwinds like Ctrl-C, so the bench's redis-server is stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    keys = Keys("bench")
    results: dict[str, list[dict[str, dict[str, float]]]] = {layout.name: [] for layout in layouts}
    with LocalRedis() as server:
        client = redis.Redis.from_url(server.url)
        spread = args.levels == "spread"
        populate(client, keys, args.types, busy_fraction=args.busy_fraction, spread_levels=spread)
        print(f"load average before: {_loadavg()}", flush=True)
        for run in range(args.runs):
            for layout in layouts:
                r = run_layout(client, keys, layout, args.iterations, peer_every=args.peer_every)
                results[layout.name].append(r)
                print(f"run {run + 1} {layout.name}: " + _line(r), flush=True)
        client.close()
    print(f"load average after: {_loadavg()}")
    print()
    summary = {name: _summarize(runs) for name, runs in results.items()}
    for name, s in summary.items():
        peer_passes = -(-args.iterations // args.peer_every)
        print(
            f"{name} (median over {args.runs} runs of {args.iterations} passes, "
            f"{peer_passes} for the pipeline):"
        )
        for v, stats in s.items():
            print(f"  {v:9s} " + "  ".join(f"{k} {x:7.2f}" for k, x in stats.items()))
        for part in ("total", "cpu"):
            ratio = s["pipeline"][f"{part}_median_ms"] / s["lua"][f"{part}_median_ms"]
            print(f"  pipeline / lua {part} median: {ratio:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            record = {"args": vars(args), "runs": results, "summary": summary}
            json.dump(record, f, indent=2)
    return 0


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _line(r: dict[str, dict[str, float]]) -> str:
    return "  ".join(
        f"{v}: total {s['total_median_ms']:.2f} ms (p99 {s['total_p99_ms']:.2f}; "
        f"observe {s['observe_median_ms']:.2f}, decide {s['decide_median_ms']:.2f}; "
        f"cpu {s['client_cpu_median_ms']:.2f} + redis {s['redis_cpu_median_ms']:.2f})"
        for v, s in r.items()
    )


def _summarize(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {
        v: {k: statistics.median(run[v][k] for run in runs) for k in runs[0][v]} for v in runs[0]
    }


if __name__ == "__main__":
    sys.exit(main())
