"""Tracing overhead: drain throughput with tracing off, at 1 % and at 100 %.

Issue 24 asks that tracing at 1 % sampling keep at least 97 % of the drain
rate with tracing off, and for the figure at 100 %.  Each round runs the
three modes in turn (alternated, so the shared machine's load drifts over
all of them alike): N no-ops are enqueued by a child process (traced in the
same mode: its envelopes carry the trace context, as a traced producer's
would), then one ``taskscale worker`` process with T threads drains them;
the rate is tasks completed over the time from the first completion seen
to the last (start-up excluded), read from the type's ``completed``
counter every 5 ms.  Spans go to a real Jaeger (scripts/build-jaeger.sh)
on loopback, on the same machine: its CPU is part of the 100 % cost.

    .venv/bin/python -m bench.tracing_bench --n 20000 --rounds 3 --threads 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

from taskscale.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.jaeger import Jaeger, jaeger_binary  # noqa: E402  (tests/ is not a package)
from support.redis_server import RedisServer  # noqa: E402

TYPE = "noop"
KEYS = Keys("taskscale")
ENQUEUE = (
    "import sys; from taskscale.producer import Producer; p = Producer(); n = int(sys.argv[1]);"
    "[p.enqueue_many('noop', [[]] * min(1000, n - i)) for i in range(0, n, 1000)]"
)


def modes(otlp_url: str) -> dict[str, dict[str, str]]:
    traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_url, "OTEL_SERVICE_NAME": "bench"}
    return {
        "off": {},
        "1 %": {
            **traced,
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.01",
        },
        "100 %": {**traced, "OTEL_TRACES_SAMPLER": "parentbased_always_on"},
    }


def drain(url: str, extra: dict[str, str], n: int, threads: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(extra, TASKSCALE_REDIS_URL=url, TASKSCALE_NAMESPACE=KEYS.namespace)
    client = redis.Redis.from_url(url)
    client.flushall()
    subprocess.run([sys.executable, "-c", ENQUEUE, str(n)], env=env, check=True, cwd=ROOT)
    argv = [sys.executable, "-m", "taskscale.cli", "worker", "--types", TYPE]
    argv += ["--import", "taskscale.examples", "--threads", str(threads), "--log-level", "WARNING"]
    worker = subprocess.Popen(argv, env=env, cwd=ROOT)
    try:
        first = last = 0.0
        done0 = 0
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = int(client.hget(KEYS.stats(TYPE), "completed") or 0)
            now = time.monotonic()
            if done and not first:
                first, done0 = now, done
            if done >= n:
                last = now
                break
            time.sleep(0.005)
        if not last:
            raise RuntimeError(f"drain did not finish: {done} of {n}")
        return (n - done0) / (last - first)
    finally:
        worker.terminate()
        worker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    binary = jaeger_binary()
    if binary is None:
        sys.exit("Jaeger is not built: bash scripts/build-jaeger.sh")
    rates: dict[str, list[float]] = {}
    with Jaeger(binary) as jaeger, RedisServer() as server:
        for round_ in range(args.rounds):
            for name, extra in modes(jaeger.otlp_url).items():
                rate = drain(server.url, extra, args.n, args.threads)
                rates.setdefault(name, []).append(rate)
                print(f"round {round_ + 1} {name:>6}: {rate:,.0f} tasks/s", flush=True)
    off = statistics.median(rates["off"])
    print(f"load average now: {os.getloadavg()}")
    for name, samples in rates.items():
        median = statistics.median(samples)
        shown = " / ".join(f"{r:,.0f}" for r in samples)
        print(f"{name:>6}: {shown}  median {median:,.0f} tasks/s = {median / off:.1%} of off")


if __name__ == "__main__":
    main()
