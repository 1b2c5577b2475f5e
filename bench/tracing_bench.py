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
``completed`` counter every 5 ms.  The worker's CPU per task is its CPU
time (every thread's, in ns from /proc/<pid>/task/*/schedstat) from the
first completion to ``--settle`` seconds after the last, so that the batch
span processor's last export (``OTEL_BSP_SCHEDULE_DELAY`` is set to 500 ms
in the traced modes) is counted too -- less sensitive to the other loads
of a shared machine than the rate; the settle time costs every mode alike.
Spans go to a real Jaeger (scripts/build-jaeger.sh) on loopback, on the
same machine: its CPU is part of the 100 % rate (not of the worker's CPU).
The order of the modes turns by one each round; each round's ratios to
that round's "off" are reported beside the medians (pairing cancels part
of the machine's drift).

    .venv/bin/python -m bench.tracing_bench --n 30000 --rounds 9 --threads 16
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


def cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid``, all its live threads, to the ns
    (``/proc/<pid>/task/*/schedstat``: the clock ticks of /proc/<pid>/stat
    are 10 ms, 1 % of a 1-second drain)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return total / 1e9


def modes(otlp_url: str) -> dict[str, dict[str, str]]:
    traced = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_url,
        "OTEL_SERVICE_NAME": "bench",
        "OTEL_BSP_SCHEDULE_DELAY": "500",  # the last export inside the settle time
    }
    return {
        "off": {},
        "0 %": {  # every task "not sampled": the unsampled path alone
            **traced,
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0",
        },
        "1 %": {
            **traced,
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.01",
        },
        "100 %": {**traced, "OTEL_TRACES_SAMPLER": "parentbased_always_on"},
    }


def drain(
    url: str, extra: dict[str, str], n: int, threads: int, settle_s: float = 1.0
) -> tuple[float, float]:
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
                last = now
                break
            time.sleep(0.005)
        if not last:
            raise RuntimeError(f"drain did not finish: {done} of {n}")
        time.sleep(settle_s)  # the batch processor's last export
        cpu1 = cpu_s(worker.pid)
        return (n - done0) / (last - first), (cpu1 - cpu0) / (n - done0) * 1e6
    finally:
        worker.terminate()
        worker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--modes", nargs="+", help="a subset: off, '0 %%', '1 %%', '100 %%'")
    parser.add_argument("--settle", type=float, default=1.0, help="s after the last task")
    args = parser.parse_args()
    binary = jaeger_binary()
    if binary is None:
        sys.exit("Jaeger is not built: bash scripts/build-jaeger.sh")
    rates: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    print(f"load average before: {os.getloadavg()}", flush=True)
    with Jaeger(binary) as jaeger, RedisServer() as server:
        chosen = {k: v for k, v in modes(jaeger.otlp_url).items() if k in (args.modes or [k])}
        order = list(chosen)
        for round_ in range(args.rounds):
            turned = order[round_ % len(order) :] + order[: round_ % len(order)]
            for name in turned:
                rate, cpu = drain(server.url, chosen[name], args.n, args.threads, args.settle)
                rates.setdefault(name, []).append(rate)
                cpus.setdefault(name, []).append(cpu)
                print(
                    f"round {round_ + 1} {name:>6}: {rate:,.0f} tasks/s, {cpu:.1f} us CPU/task"
                    f"  (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    print(f"load average after: {os.getloadavg()}")
    summary(rates, cpus)


def summary(rates: dict[str, list[float]], cpus: dict[str, list[float]]) -> None:
    """Medians and spreads; each round's ratio to the same round's off."""
    off, off_cpu = statistics.median(rates["off"]), statistics.median(cpus["off"])
    for name, samples in rates.items():
        median, cpu = statistics.median(samples), statistics.median(cpus[name])
        shown = " / ".join(f"{r:,.0f}" for r in samples)
        print(
            f"{name:>6}: {shown}  median {median:,.0f} tasks/s = {median / off:.1%} of off"
            f" (range {min(samples):,.0f}..{max(samples):,.0f})"
        )
        shown = " / ".join(f"{c:.1f}" for c in cpus[name])
        print(
            f"{'':>6}  CPU/task {shown} us  median {cpu:.1f} us = {off_cpu / cpu:.1%}"
            f" of off's tasks per CPU second (range {min(cpus[name]):.1f}..{max(cpus[name]):.1f})"
        )
        paired_rate = [r / o for r, o in zip(samples, rates["off"], strict=True)]
        paired_cpu = [o / c for c, o in zip(cpus[name], cpus["off"], strict=True)]
        print(
            f"{'':>6}  paired with its round's off: rate median"
            f" {statistics.median(paired_rate):.1%}, per CPU median"
            f" {statistics.median(paired_cpu):.1%}"
            f" ({' / '.join(f'{x:.1%}' for x in paired_cpu)})"
        )


if __name__ == "__main__":
    main()
