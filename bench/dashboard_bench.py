"""Dashboard API latency and the Redis cost of one overview refresh.

Why: the overview page polls ``/api/overview`` every 2 s for as long as it is
open, so its cost lands on the production Redis.  This fills a real
redis-server with 1000 task types (ready tasks at several priority levels,
delayed tasks, dead letters, counters) and 200 live workers (registry
records and catalog entries, 5 types each), serves the dashboard from this
process with uvicorn, and measures:

* wall time of ``GET`` on each read endpoint, over HTTP on loopback
  (median, p99);
* the Redis side of one refresh -- commands and server-side microseconds
  from ``INFO commandstats`` after ``CONFIG RESETSTAT`` -- for the overview
  (what the page polls) beside ``taskscale status`` (``status.collect``).

Run: ``.venv/bin/python -m bench.dashboard_bench [--types 1000] [--workers 200]
[--requests 100]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import redis

import taskscale
from taskscale import status
from taskscale.catalog import read_catalog
from taskscale.dashboard import data
from taskscale.dashboard.server import serve_in_thread
from taskscale.demo.localredis import LocalRedis
from taskscale.keys import PRIORITY_LEVELS, Keys
from taskscale.shards import ShardMap

KEYS = Keys("taskscale")
ENDPOINTS = ("/api/overview", "/api/status", "/api/catalog", "/api/workers", "/api/scalers")


def populate(
    client: redis.Redis, *, types: int, workers: int, seed: int = 7, busy: float = 1.0
) -> None:
    """Realistic state in the documented schema, written with plain commands;
    only the first ``busy`` fraction of the types has ready tasks."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    names = [f"type-{i:04d}" for i in range(types)]
    pipe = client.pipeline(transaction=False)
    for i, name in enumerate(names):
        pipe.sadd(KEYS.types, name)
        for level in rng.sample(range(PRIORITY_LEVELS), 2 if i < busy * types else 0):
            for _ in range(rng.randint(0, 3)):
                env = {"id": f"{name}-{rng.random()}", "type": name, "args": [], "kwargs": {}}
                env["enqueued_ms"] = now_ms - rng.randint(0, 60_000)
                pipe.rpush(KEYS.queue(name, level), json.dumps(env))
                pipe.hincrby(KEYS.queued, name, 1)  # the ready count, as enqueue keeps it
        for _ in range(rng.randint(0, 3)):
            env = {"id": f"{name}-d{rng.random()}", "type": name, "args": [], "kwargs": {}}
            pipe.zadd(KEYS.delayed(name), {json.dumps(env): now_ms + rng.randint(-5000, 300_000)})
        if rng.random() < 0.2:
            pipe.rpush(
                KEYS.dead(name), json.dumps({"envelope": "{}", "error": "x", "failed_ms": 1})
            )
        pipe.hset(
            KEYS.stats(name),
            mapping={"enqueued": 100, "claimed": 90, "completed": 85, "failed": 5, "wait_ms": 900},
        )
        pipe.hset(KEYS.active, name, rng.randint(0, 2))
        if rng.random() < 0.2:  # a fifth ran tasks in the last minute: its history
            for bucket in range(now_ms // 10_000 - 7, now_ms // 10_000 + 1):
                fields = {"c": rng.randint(0, 50), "f": rng.randint(0, 3), "d": rng.randint(0, 1)}
                pipe.hset(KEYS.history(name, bucket), mapping=fields)
        pipe.hset(KEYS.idle_since, name, f"{time.time() - rng.randint(0, 600):.3f}")
    entry = {
        "type": "",
        "registered": True,
        "function": "app.tasks.handler",
        "params": [{"name": "x", "kind": "positional_or_keyword", "annotation": "int"}],
        "returns": "None",
        "doc": "Handles one thing.",
        "version": "1.2.3",
    }
    for w in range(workers):
        worker_id = f"worker-{w:03d}"
        served = [names[(w * 5 + k) % types] for k in range(5)]
        pipe.zadd(KEYS.workers, {worker_id: now_ms + 3_600_000})
        pipe.hset(
            KEYS.worker(worker_id),
            mapping={
                "id": worker_id,
                "pod": f"pod-{w}",
                "host": "bench",
                "pid": w,
                "types": ",".join(served),
                "threads": 8,
                "busy": rng.randint(0, 8),
                "started_ms": now_ms,
                "heartbeat_ms": now_ms,
                "stats": json.dumps(
                    {t: {"completed": 1, "failed": 0, "avg_ms": 3.0} for t in served}
                ),
            },
        )
        doc = {"format": 1, "types": {t: {**entry, "type": t} for t in served}}
        pipe.hset(KEYS.catalog(worker_id), mapping={"digest": "x", "doc": json.dumps(doc)})
    pipe.execute()


def redis_cost(client: redis.Redis, refresh: Callable[[], Any]) -> tuple[int, int]:
    """(commands, server µs) of one call of ``refresh``, from INFO commandstats."""
    client.config_resetstat()
    refresh()
    stats = client.info("commandstats")
    # RESETSTAT's own INFO call is not part of the refresh
    calls = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    usec = sum(int(v["usec"]) for k, v in stats.items() if k != "cmdstat_info")
    return calls - 1, usec  # minus CONFIG RESETSTAT


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--paths", nargs="+", default=ENDPOINTS, help="the endpoints to GET")
    parser.add_argument("--busy", type=float, default=1.0, help="fraction with ready tasks")
    parser.add_argument("--no-cost", action="store_true", help="skip the Redis cost part")
    args = parser.parse_args()
    with LocalRedis() as server:
        client = redis.Redis.from_url(server.url)
        populate(client, types=args.types, workers=args.workers, busy=args.busy)
        # snapshot_s=0: every GET reads Redis (the worst case: the cache shares
        # one read per second among viewers; one viewer polls every 2 s anyway)
        running = serve_in_thread(server.url, namespace="taskscale", snapshot_s=0.0)
        try:
            print(
                f"{args.types} types ({args.busy:.0%} with ready tasks), {args.workers} workers;"
                f" {args.requests} GETs each"
            )
            print(f"taskscale from {taskscale.__file__}")
            for path in args.paths:
                urllib.request.urlopen(running.url + path.lstrip("/")).read()  # warm
                times = []
                for _ in range(args.requests):
                    t0 = time.perf_counter()
                    with urllib.request.urlopen(running.url + path.lstrip("/")) as reply:
                        size = len(reply.read())
                    times.append((time.perf_counter() - t0) * 1000)
                print(
                    f"GET {path:16} median {statistics.median(times):7.1f} ms  "
                    f"p99 {percentile(times, 0.99):7.1f} ms  ({size / 1024:.0f} KiB)"
                )
        finally:
            running.stop()
        if args.no_cost:
            return

        def overview() -> None:  # what GET /api/overview reads
            data.overview(client, ShardMap((KEYS.namespace,)))
            read_catalog(client, KEYS)

        for name, refresh in (
            ("overview refresh", overview),
            ("taskscale status", lambda: status.collect(client, KEYS)),
        ):
            costs = [redis_cost(client, refresh) for _ in range(20)]
            commands = costs[0][0]
            usec = statistics.median(c[1] for c in costs)
            print(f"Redis cost of one {name:17}: {commands} commands, {usec:.0f} µs (median of 20)")


if __name__ == "__main__":
    main()
