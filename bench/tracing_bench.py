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
of the machine's drift).  The CPU is also split by thread (executors,
claimer, reporter, the batch span processor), thread names written by
bench/tracing_tasks.py inside the worker.  ``--body incr`` drains tasks
that each do one Redis INCR (issue 27's body) instead of no-ops.

    .venv/bin/python -m bench.tracing_bench --n 30000 --rounds 9 --threads 16
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

import redis

from taskscale.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.jaeger import Jaeger, jaeger_binary  # noqa: E402  (tests/ is not a package)
from support.redis_server import RedisServer  # noqa: E402

KEYS = Keys("taskscale")
#: The task bodies: the type's name, from taskscale.examples or bench.tracing_tasks.
BODIES = ("noop", "incr")
#: One enqueue per task: enqueue_many would make one trace of each chunk of
#: 1000, and "1 %" would then sample whole chunks (0 or 3 % of 30,000 tasks).
ENQUEUE = (
    "import sys; from taskscale.producer import Producer; p = Producer();"
    "[p.enqueue(sys.argv[2]) for _ in range(int(sys.argv[1]))]"
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


def thread_cpu_ns(pid: int) -> dict[str, int]:
    """CPU ns of each live thread of ``pid`` by native thread id."""
    found: dict[str, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                found[tid] = int(f.read().split()[0])
        except FileNotFoundError:
            continue
    return found


def by_thread(before: dict[str, int], after: dict[str, int], names_file: Path) -> dict[str, int]:
    """CPU ns between two snapshots, summed by kind of thread."""
    try:
        names: dict[str, str] = json.loads(names_file.read_text())
    except (OSError, ValueError):
        names = {}
    groups: dict[str, int] = {}
    for tid, ns in after.items():
        name = names.get(tid, "other")
        if name.startswith("Thread-") or "executor" in name.lower():
            name = "executors"
        elif name.startswith("OtelBatch"):
            name = "span processor"
        elif name == "bench-names":
            continue
        groups[name] = groups.get(name, 0) + ns - before.get(tid, 0)
    return groups


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
    url: str,
    extra: dict[str, str],
    n: int,
    threads: int,
    settle_s: float = 1.0,
    body: str = "noop",
) -> tuple[float, float, dict[str, float]]:
    """(tasks/s, worker CPU us per task, that CPU by kind of thread) of one drain."""
    names_file = Path(f"/tmp/tracing_bench.{os.getpid()}.names.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(extra, TASKSCALE_REDIS_URL=url, TASKSCALE_NAMESPACE=KEYS.namespace)
    env["TRACING_BENCH_NAMES"] = str(names_file)
    client = redis.Redis.from_url(url)
    client.flushall()
    subprocess.run([sys.executable, "-c", ENQUEUE, str(n), body], env=env, check=True, cwd=ROOT)
    argv = [sys.executable, "-m", "taskscale.cli", "worker", "--types", body]
    argv += ["--import", "taskscale.examples", "--import", "bench.tracing_tasks"]
    argv += ["--threads", str(threads), "--log-level", "WARNING"]
    worker = subprocess.Popen(argv, env=env, cwd=ROOT)
    try:
        first = last = 0.0
        done0 = 0
        before: dict[str, int] = {}
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = int(client.hget(KEYS.stats(body), "completed") or 0)
            now = time.monotonic()
            if done and not first:
                first, done0, before = now, done, thread_cpu_ns(worker.pid)
            if done >= n:
                last = now
                break
            time.sleep(0.005)
        if not last:
            raise RuntimeError(f"drain did not finish: {done} of {n}")
        time.sleep(settle_s)  # the batch processor's last export
        groups = by_thread(before, thread_cpu_ns(worker.pid), names_file)
        per_task = {k: v / (n - done0) / 1e3 for k, v in groups.items()}
        return (n - done0) / (last - first), sum(per_task.values()), per_task
    finally:
        worker.terminate()
        worker.wait(30)
        names_file.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--modes", nargs="+", help="a subset: off, '0 %%', '1 %%', '100 %%'")
    parser.add_argument("--settle", type=float, default=1.0, help="s after the last task")
    parser.add_argument("--body", choices=BODIES, default="noop", help="the task body")
    args = parser.parse_args()
    binary = jaeger_binary()
    if binary is None:
        sys.exit("Jaeger is not built: bash scripts/build-jaeger.sh")
    rates: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    parts: dict[str, dict[str, list[float]]] = {}
    print(f"load average before: {os.getloadavg()}", flush=True)
    with Jaeger(binary) as jaeger, RedisServer() as server:
        chosen = {k: v for k, v in modes(jaeger.otlp_url).items() if k in (args.modes or [k])}
        order = list(chosen)
        for round_ in range(args.rounds):
            turned = order[round_ % len(order) :] + order[: round_ % len(order)]
            for name in turned:
                rate, cpu, split = drain(
                    server.url, chosen[name], args.n, args.threads, args.settle, args.body
                )
                rates.setdefault(name, []).append(rate)
                cpus.setdefault(name, []).append(cpu)
                for kind, us in split.items():
                    parts.setdefault(name, {}).setdefault(kind, []).append(us)
                shown = ", ".join(f"{k} {v:.1f}" for k, v in sorted(split.items()))
                print(
                    f"round {round_ + 1} {name:>6}: {rate:,.0f} tasks/s, {cpu:.1f} us CPU/task"
                    f" ({shown})  (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    print(f"load average after: {os.getloadavg()}")
    summary(rates, cpus)
    for name, kinds in parts.items():
        shown = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in sorted(kinds.items()))
        print(f"{name:>6}: CPU us/task by thread, medians: {shown}")


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
