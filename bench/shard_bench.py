"""Sharding benchmark: drain throughput with types on 1 vs 3 cluster masters,
and the observer's cost for 1000 types over 3 namespaces.

    .venv/bin/python -m bench.shard_bench                 # 3 runs of each layout
    .venv/bin/python -m bench.shard_bench --tasks 5000 --runs 1

One real Redis Cluster (3 masters + 3 replicas, tests/support/topologies.py) on
loopback.  Layout "1 shard": every type in one namespace (one master), 3
worker processes each serving every type.  Layout "3 shards": the types
spread over three namespaces placed on the three masters
(taskscale.shards.spread_namespaces), one worker process per namespace.
Same tasks, same number of processes and threads, interleaved run by run.
Rate = tasks / (time from the first completion to the last), polled from
the stats counters every 20 ms.  Redis cost per task = the masters' CPU
(``INFO cpu``, user + sys) and commands (``INFO commandstats``) over the
drain, divided by the tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from bench.shard_noops import TYPES
from taskscale.connection import connect
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.sharded import ShardedObserver
from taskscale.keys import Keys
from taskscale.producer import Call
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardedProducer, ShardMap, spread_namespaces

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the cluster launcher the tests use
from support.topologies import ClusterServers  # noqa: E402


def master_cost(cluster: ClusterServers) -> tuple[float, int]:
    """CPU seconds and commands of the masters so far."""
    cpu, calls = 0.0, 0
    for port in cluster.masters():
        node = redis.Redis(host="127.0.0.1", port=port)
        info = node.info("cpu")
        cpu += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        calls += sum(int(v["calls"]) for v in node.info("commandstats").values())
        node.close()
    return cpu, calls


def completed(client: RedisClient, shards: ShardMap) -> int:
    return sum(int(client.hget(shards.keys_for(t).stats(t), "completed") or 0) for t in TYPES)


def drain(cluster: ClusterServers, shards: ShardMap, tasks: int, threads: int) -> dict[str, Any]:
    client = connect(cluster.url)
    client.flushall()
    producer = ShardedProducer(client, shards)
    per_type = tasks // len(TYPES)
    for task_type in TYPES:
        producer.enqueue_many(task_type, [Call(()) for _ in range(per_type)])
    total = per_type * len(TYPES)
    groups = shards.group(TYPES)
    plans = list(groups.values()) if shards.sharded else [TYPES] * 3
    env = {**os.environ, "TASKSCALE_REDIS_URL": cluster.url, "PYTHONPATH": str(REPO)}
    cpu0, calls0 = master_cost(cluster)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "taskscale.cli",
                "worker",
                "--import",
                "bench.shard_noops",
                "--namespace",
                ",".join(shards.namespaces),
                "--types",
                ",".join(types),
                "--threads",
                str(threads),
                "--log-level",
                "error",
            ],
            env=env,
        )
        for types in plans
    ]
    first = last = None
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            done = completed(client, shards)
            now = time.monotonic()
            if done and first is None:
                first = (now, done)
            if done >= total:
                last = now
                break
            time.sleep(0.02)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    cpu1, calls1 = master_cost(cluster)
    if first is None or last is None:
        raise RuntimeError("drain did not finish in 300 s")
    rate = (total - first[1]) / (last - first[0])
    return {
        "shards": len(shards.namespaces),
        "tasks": total,
        "rate": round(rate),
        "redis_cpu_us_per_task": round((cpu1 - cpu0) / total * 1e6, 2),
        "redis_calls_per_task": round((calls1 - calls0) / total, 2),
    }


def observer_cost(
    cluster: ClusterServers, namespaces: tuple[str, ...], passes: int
) -> dict[str, Any]:
    """observe() of 1000 types, one namespace vs spread over the given ones."""
    client = connect(cluster.url)
    client.flushall()
    types = tuple(f"type{i}" for i in range(1000))
    spread = ShardMap(namespaces)
    one = ShardMap((namespaces[0],))
    for shards in (one, spread):
        producer = ShardedProducer(client, shards)
        for i, t in enumerate(types):
            if i % 10 == 0:  # 10 % busy
                producer.enqueue(t)
            client.hset(shards.keys_for(t).stats(t), mapping={"completed": 1})
    request = {"s": ObserveRequest(types=types, lead_s=30)}
    out: dict[str, Any] = {}
    for name, observer in (
        ("1 namespace", Observer(client, Keys(namespaces[0]))),
        (f"{len(namespaces)} namespaces", ShardedObserver(client, spread)),
    ):
        times = []
        for _ in range(passes):
            start = time.perf_counter()
            observer.observe(request)
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        out[name] = {
            "median_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[int(len(times) * 0.99) - 1], 2),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--passes", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    with ClusterServers() as cluster:
        client = connect(cluster.url)
        spread = spread_namespaces(client, "bench")  # type: ignore[arg-type]
        layouts = [ShardMap((spread[0],)), ShardMap(spread)]
        samples: list[dict[str, Any]] = []
        for run in range(args.runs):
            for shards in layouts:
                sample = drain(cluster, shards, args.tasks, args.threads)
                sample["run"] = run
                sample["load1"] = os.getloadavg()[0]
                print(json.dumps(sample), flush=True)
                samples.append(sample)
        observe = observer_cost(cluster, spread, args.passes)
    print(json.dumps({"observer_1000_types": observe}), flush=True)
    by = {n: [s for s in samples if s["shards"] == n] for n in (1, 3)}
    summary = {
        n: {
            k: statistics.median(s[k] for s in found)
            for k in ("rate", "redis_cpu_us_per_task", "redis_calls_per_task")
        }
        for n, found in by.items()
    }
    ratios = [b["rate"] / a["rate"] for a, b in zip(by[1], by[3], strict=True)]
    print(json.dumps({"median": summary, "ratio_3_to_1_per_run": [round(r, 2) for r in ratios]}))
    if args.json is not None:
        args.json.write_text(
            json.dumps({"samples": samples, "median": summary, "observer": observe}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
