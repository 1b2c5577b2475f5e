"""Tracing overhead: drain throughput with tracing off, at 1 % and at 100 %.

Issue 24 asks that tracing at 1 % sampling keep at least 97 % of the drain
rate with tracing off, and for the figure at 100 %.  Each round runs the
three modes in turn (alternated, so the shared machine's load drifts over
all of them alike): N no-ops are enqueued by a child process, one
``enqueue`` (so one trace, one sampling decision) per task, traced in the
same mode: its envelopes carry the trace context, as a traced producer's
would.  The enqueue is over before the worker starts, so its cost is not
in the figures.  Then one ``taskscale worker`` process with T threads
drains them; the rate is tasks completed over the time from the first
completion seen to the last (start-up excluded), read from the type's
``completed`` counter every 5 ms, and the worker process's CPU time
(user + system, /proc) over the same span, per task -- less sensitive to
the other loads of a shared machine than the rate.  Spans go to a real
Jaeger (scripts/build-jaeger.sh) on loopback, on the same machine: its CPU
is part of the 100 % cost.

    .venv/bin/python -m bench.tracing_bench --n 30000 --rounds 5 --threads 16
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
#: One enqueue per task: enqueue_many would make one trace of each chunk of
#: 1000, and "1 %" would then sample whole chunks (0 or 3 % of 30,000 tasks).
ENQUEUE = (
    "import sys; from taskscale.producer import Producer; p = Producer();"
    "[p.enqueue('noop') for _ in range(int(sys.argv[1]))]"
)
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


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


def drain(url: str, extra: dict[str, str], n: int, threads: int) -> tuple[float, float]:
    """(tasks/s, worker CPU microseconds per task) of one drain."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(extra, TASKSCALE_REDIS_URL=url, TASKSCALE_NAMESPACE=KEYS.namespace)
    client = redis.Redis.from_url(url)
    client.flushall()
    subprocess.run([sys.executable, "-c", ENQUEUE, str(n)], env=env, check=True, cwd=ROOT)
    argv = [sys.executable, "-m", "taskscale.cli", "worker", "--types", TYPE]
    argv += ["--import", "taskscale.examples", "--threads", str(threads), "--log-level", "WARNING"]
    worker = subprocess.Popen(argv, env=env, cwd=ROOT)
    try:
        first = last = cpu0 = cpu1 = 0.0
        done0 = 0
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = int(client.hget(KEYS.stats(TYPE), "completed") or 0)
            now = time.monotonic()
            if done and not first:
                first, done0, cpu0 = now, done, cpu_s(worker.pid)
            if done >= n:
                last, cpu1 = now, cpu_s(worker.pid)
                break
            time.sleep(0.005)
        if not last:
            raise RuntimeError(f"drain did not finish: {done} of {n}")
        return (n - done0) / (last - first), (cpu1 - cpu0) / (n - done0) * 1e6
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
    cpus: dict[str, list[float]] = {}
    print(f"load average before: {os.getloadavg()}", flush=True)
    with Jaeger(binary) as jaeger, RedisServer() as server:
        for round_ in range(args.rounds):
            for name, extra in modes(jaeger.otlp_url).items():
                rate, cpu = drain(server.url, extra, args.n, args.threads)
                rates.setdefault(name, []).append(rate)
                cpus.setdefault(name, []).append(cpu)
                print(
                    f"round {round_ + 1} {name:>6}: {rate:,.0f} tasks/s, {cpu:.0f} us CPU/task",
                    flush=True,
                )
    print(f"load average after: {os.getloadavg()}")
    off, off_cpu = statistics.median(rates["off"]), statistics.median(cpus["off"])
    for name, samples in rates.items():
        median, cpu = statistics.median(samples), statistics.median(cpus[name])
        shown = " / ".join(f"{r:,.0f}" for r in samples)
        print(
            f"{name:>6}: {shown}  median {median:,.0f} tasks/s = {median / off:.1%} of off;"
            f" CPU/task median {cpu:.1f} us = {off_cpu / cpu:.1%} of off's throughput per CPU"
        )


if __name__ == "__main__":
    main()
