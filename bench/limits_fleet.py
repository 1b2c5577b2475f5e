"""Redis cost per task of a rate-limited type with real worker processes.

    .venv/bin/python -m bench.limits_fleet            # 3 runs, 200 tasks, 2 x 16 threads

bench/limits_bench.py measures the claim script alone; here W worker
processes (``taskscale worker``, 16 threads each) drain the same N no-op
tasks once with the type limited to R per second (burst 1) and once
unlimited, interleaved, and ``INFO commandstats`` (reset before each drain)
gives every script call the fleet made -- claims that found a token, claims
that found none (a held type retried at its refill by every worker),
completions and heartbeats -- per task.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

from taskscale.keys import Keys
from taskscale.limits import clear_limits, set_limits
from taskscale.producer import Call, Producer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.redis_server import RedisServer  # noqa: E402  (tests/ is not a package)
from support.workers import taskscale_process  # noqa: E402


def drain(url: str, tasks: int, workers: int, rate: str | None) -> dict[str, float]:
    r = redis.Redis.from_url(url)
    r.flushall()
    keys = Keys("taskscale")
    if rate is not None:
        set_limits("noop", rate=rate, client=r, keys=keys)
    else:
        clear_limits("noop", client=r, keys=keys)
    Producer(r, keys=keys).enqueue_many("noop", [Call(()) for _ in range(tasks)])
    r.config_resetstat()
    t0 = time.monotonic()
    procs = [
        taskscale_process(
            url,
            *("worker", "--import", "taskscale.examples", "--types", "noop", "--threads", "16"),
            *("--log-level", "WARNING"),
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        deadline = time.monotonic() + 600
        while int(r.hget(keys.stats("noop"), "completed") or 0) < tasks:
            if time.monotonic() > deadline:
                raise RuntimeError("drain did not finish in 600 s")
            time.sleep(0.1)
        elapsed = time.monotonic() - t0
        stats = r.info("commandstats")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)
    r.close()
    ev = stats.get("cmdstat_evalsha", {})
    total_usec = sum(int(v.get("usec", 0)) for v in stats.values())
    return {
        "seconds": elapsed,
        "script_calls_per_task": int(ev.get("calls", 0)) / tasks,
        "script_usec_per_task": int(ev.get("usec", 0)) / tasks,
        "all_commands_usec_per_task": total_usec / tasks,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rate", default="20/s")
    args = p.parse_args()
    samples: dict[str, list[dict[str, float]]] = {"limited": [], "unlimited": []}
    with RedisServer() as server:
        for i in range(args.runs):
            order = ["limited", "unlimited"] if i % 2 == 0 else ["unlimited", "limited"]
            for name in order:
                rate = args.rate if name == "limited" else None
                samples[name].append(drain(server.url, args.tasks, args.workers, rate))
            print(f"run {i + 1}/{args.runs} done", file=sys.stderr)
    print("| fleet | s | script calls per task | script µs per task | all commands µs per task |")
    print("|---|---|---|---|---|")
    for name, rows in samples.items():
        m = {f: statistics.median(s[f] for s in rows) for f in rows[0]}
        print(
            f"| {name} | {m['seconds']:.1f} | {m['script_calls_per_task']:.2f} | "
            f"{m['script_usec_per_task']:.1f} | {m['all_commands_usec_per_task']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
