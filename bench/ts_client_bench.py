"""The TypeScript client beside the Python runtime (issue 22), same run.

Two figures per client, on one ``redis-server`` started here (loopback,
no persistence), flushed before each measurement, medians of ``--runs``:

* enqueue rate: N no-op tasks enqueued through the public API -- one call
  per task awaited in turn ("single"), and one batch call per 500 tasks
  ("batch"); the TypeScript client also with up to 64 calls in flight, the
  way async code calls it. Python's calls are made in this process, the
  TypeScript ones in a ``node`` child; the rate is N over the time spent in
  the calls (connecting and the first script load excluded).
* drain rate: N no-ops enqueued first, then one worker process started with
  its own command (``taskscale worker --threads C`` / ``taskscale-ts-worker
  --concurrency C``); the rate is N over the time from the worker's
  registration (its lease in ``{ns}:workers``) to the ``completed`` counter
  reaching N (polled every 5 ms), so process start-up is excluded.

    .venv/bin/python -m bench.ts_client_bench            # 3 runs
    .venv/bin/python -m bench.ts_client_bench --runs 1 --tasks 2000

Needs what scripts/setup.sh installs (node, the built client).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis

from taskscale.demo.localredis import LocalRedis
from taskscale.keys import Keys
from taskscale.producer import Call, Producer

REPO = Path(__file__).resolve().parents[1]
CLIENT = REPO / "clients" / "typescript"
KEYS = Keys("taskscale")


def node() -> str:
    found = shutil.which("node")
    if found is None:
        sys.exit("node is not installed: run scripts/setup.sh")
    return found


def env_for(url: str) -> dict[str, str]:
    return {**os.environ, "TASKSCALE_REDIS_URL": url, "TASKSCALE_NAMESPACE": KEYS.namespace}


def py_enqueue(client: redis.Redis, mode: str, n: int) -> float:
    producer = Producer(client, keys=KEYS)
    producer.enqueue("noop")  # the script loaded, outside the timing
    started = time.perf_counter()
    if mode == "batch":
        producer.enqueue_many("noop", [Call(()) for _ in range(n)])
    else:
        for _ in range(n):
            producer.enqueue("noop")
    return time.perf_counter() - started


def ts_enqueue(url: str, mode: str, n: int) -> float:
    out = subprocess.run(
        [node(), str(CLIENT / "bench" / "enqueue_bench.js"), mode, str(n)],
        env=env_for(url),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return float(json.loads(out.stdout)["seconds"])


def worker_command(language: str, concurrency: int) -> list[str]:
    if language == "python":
        cli = [sys.executable, "-m", "taskscale.cli", "worker", "--import", "taskscale.examples"]
        return [*cli, "--types", "noop", "--threads", str(concurrency), "--log-level", "WARNING"]
    cli = [
        node(),
        str(CLIENT / "dist" / "cli.js"),
        "--import",
        str(CLIENT / "dist" / "examples.js"),
    ]
    return [*cli, "--types", "noop", "--concurrency", str(concurrency)]


def drain(client: redis.Redis, url: str, language: str, n: int, concurrency: int) -> float:
    Producer(client, keys=KEYS).enqueue_many("noop", [Call(()) for _ in range(n)])
    proc = subprocess.Popen(
        worker_command(language, concurrency),
        env=env_for(url),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        start = poll(lambda: client.zcard(KEYS.workers) > 0, 60)
        end = poll(lambda: int(client.hget(KEYS.stats("noop"), "completed") or 0) >= n, 600)
    finally:
        proc.terminate()
        proc.wait(30)
    return n / (end - start)


def poll(done: Callable[[], bool], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark did not finish in time")
        time.sleep(0.005)
    return time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="a worker's slots")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ts_client.json")
    args = parser.parse_args()
    if not (CLIENT / "dist" / "cli.js").exists():
        sys.exit("the TypeScript client is not built: run scripts/setup.sh")
    n, slots = args.tasks, args.concurrency
    samples: dict[str, list[float]] = {}
    with LocalRedis() as server:
        client = redis.Redis.from_url(server.url)
        cases: list[tuple[str, Callable[[], float]]] = [
            ("enqueue python single", lambda: n / py_enqueue(client, "single", n)),
            ("enqueue typescript single", lambda: n / ts_enqueue(server.url, "single", n)),
            ("enqueue typescript inflight64", lambda: n / ts_enqueue(server.url, "inflight64", n)),
            ("enqueue python batch", lambda: n / py_enqueue(client, "batch", n)),
            ("enqueue typescript batch", lambda: n / ts_enqueue(server.url, "batch", n)),
            ("drain python", lambda: drain(client, server.url, "python", n, slots)),
            ("drain typescript", lambda: drain(client, server.url, "typescript", n, slots)),
        ]
        for run in range(args.runs):
            for name, measure in cases:  # interleaved: each run measures every case
                client.flushall()
                rate = measure()
                samples.setdefault(name, []).append(rate)
                print(f"run {run + 1}: {name}: {rate:,.0f} tasks/s", flush=True)
        client.close()
    medians = {name: statistics.median(rates) for name, rates in samples.items()}
    result = {
        "tasks": n,
        "runs": args.runs,
        "concurrency": args.concurrency,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "node": subprocess.run(
            [node(), "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "python": platform.python_version(),
        "samples": samples,
        "medians": medians,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("\nmedians (tasks/s):")
    for name, rate in medians.items():
        print(f"  {name:32} {rate:10,.0f}")


if __name__ == "__main__":
    main()
