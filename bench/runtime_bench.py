"""Worker-runtime benchmark: taskscale beside RQ, arq, dramatiq, Celery and saq.

Issue 2 asks for drain throughput of pre-enqueued no-ops with 1 and 2 worker
processes, enqueue throughput, and delayed-task lateness at 1k due per
second, every system measured in the same run on the same Redis, medians of
several runs, reported as ratios. This module is the command; the harness
is in ``bench/runtime_*.py`` (settings and samples, processes, probes,
measurements, profiles, the report); the systems are in ``bench/peers`` and
run in their own virtualenv (``bash bench/setup_peers.sh``), so this process
never imports them.

    .venv/bin/python -m bench.runtime_bench            # 100k tasks, 3 runs
    .venv/bin/python -m bench.runtime_bench --quick    # 10k tasks
    .venv/bin/python -m bench.runtime_bench --table bench/results/runtime.json
    .venv/bin/python -m bench.runtime_bench --replot bench/results/runtime.json [PNG]

Issue 11 (task bodies): ``--body empty,incr,sleep`` drains with each body in
turn, interleaved within every run, at equal concurrency (``--threads`` is
every system's per-process concurrency: threads, async jobs or slots), and
adds the taskscale variants ``taskscale-async`` and ``taskscale-procs``
(``bench.peers.VARIANTS``) when asked for in ``--peers``; tables and plot
come from ``bench.bodies_report``. The drains are what is measured there, so
the queue is loaded by ``--enqueue-procs`` children at once, and after a
system's first run it is loaded with only what its drain window can take
(twice its best rate so far x the window, at most N).

    .venv/bin/python -m bench.runtime_bench --body empty,incr,sleep --workers 2 \
        --threads 16 --ops drain --peers taskscale,taskscale-async,taskscale-procs,...

How each figure is taken (the same way for every system):

* enqueue: a child process enqueues N no-ops through the system's public
  API (its batch API where it has one) with no worker running; the rate is
  N over the time spent in those calls (imports and connecting excluded).
* drain: the N tasks just enqueued are drained by W worker processes
  started with the system's own CLI. Every task body stamps the wall clock
  (``bench.peers.probe``); the rate is tasks done over the time from the
  first task's start to the last task's end, so process start-up is
  excluded. A system still draining ``drain_window`` seconds after its first
  task is measured over the tasks it finished by then (steady state; the
  sample says ``finished_all: false``). Start-up time, spawn-to-done time
  and Redis ``INFO commandstats`` per task are recorded too.
* lateness: W worker processes (the largest W of the drain runs, plus
  taskscale's scheduler process) run; a child schedules ``rate x seconds``
  delayed tasks through the system's native delay mechanism, due evenly
  from a lead time that lets the whole schedule be written before the first
  is due; each task records its start minus its due time. p50 / p99 per run
  (tasks that never ran count as infinitely late), medians over runs.

Redis is one ``redis-server`` started here on a free loopback port, flushed
before every measurement. Every child and worker is bounded in time: a
system that hangs is killed and its sample recorded as failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import redis

from bench import bodies_report
from bench.peers import PEERS, VARIANTS
from bench.peers.probe import BODIES
from bench.runtime_measure import run_all
from bench.runtime_procs import Harness
from bench.runtime_profile import print_profiles
from bench.runtime_report import markdown_table, plot, plot_title, print_table, replot, summarize
from bench.runtime_settings import DEFAULT_PEER_VENV, ROOT, BenchSettings

sys.path.insert(0, str(ROOT / "tests"))

from support.redis_server import RedisServer


def seeded_rates(path: Path) -> dict[tuple[str, str], float]:
    """Best drain rate per (system, body) in an earlier results file."""
    seen: dict[tuple[str, str], float] = {}
    for x in json.loads(path.read_text())["samples"]:
        if x["ok"] and x["op"] == "drain":
            key = (x["peer"], x.get("body", "empty"))
            seen[key] = max(seen.get(key, 0.0), x["rate"])
    return seen


def describe_peers(h: Harness) -> dict[str, Any]:
    """Each system's version and APIs; a variant the installed code can't
    run is dropped from the peers, with a note saying why."""
    described = {}
    for peer in h.settings.peers:
        answer = h.child(peer, "version", "--bindir", h.bindir, timeout=120)
        if answer.get("skip"):
            print(f"  note: {peer} skipped: {answer['skip']}", file=sys.stderr)
        described[peer] = answer
    return described


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": os.getloadavg(),
    }


def parse_args(argv: Sequence[str] | None) -> BenchSettings:
    p = argparse.ArgumentParser(
        prog="python -m bench.runtime_bench", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="10k tasks, 5 s of delayed tasks")
    p.add_argument("--n", type=int, help="tasks per drain run (default 100000)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=8, help="threads per worker process")
    p.add_argument("--workers", default="1,2", help="worker process counts to drain with")
    p.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"systems, in order (variants: {', '.join(VARIANTS)})",
    )
    p.add_argument(
        "--body",
        default="",
        help="issue 11: task bodies to drain with, interleaved (empty,incr,sleep)",
    )
    p.add_argument("--ops", default="drain,lateness")
    p.add_argument("--late-rate", type=float, default=1000.0)
    p.add_argument("--late-seconds", type=float)
    p.add_argument(
        "--seed-rates",
        type=Path,
        help="issue 11: a results file whose drain rates size the first run's queues",
    )
    p.add_argument("--enqueue-procs", type=int, default=1, help="children enqueuing at once")
    p.add_argument("--drain-window", type=float, default=30.0, help="longest drain, seconds")
    p.add_argument("--profile", type=Path, help="py-spy the drain workers; stacks go here")
    p.add_argument("--profile-gil", action="store_true", help="only samples holding the GIL")
    p.add_argument("--peer-venv", type=Path, default=DEFAULT_PEER_VENV)
    p.add_argument("--out", type=Path)
    p.add_argument("--plot", type=Path)
    a = p.parse_args(argv)
    bad = [b for b in a.body.split(",") if b and b not in BODIES]
    if bad:
        p.error(f"--body {','.join(bad)}: choose from {', '.join(BODIES)}")
    base = BenchSettings()
    suffix = ("-bodies" if a.body else "") + ("-quick" if a.quick else "")
    return replace(
        base,
        n=a.n or (10_000 if a.quick else base.n),
        runs=a.runs,
        threads=a.threads,
        workers=tuple(int(w) for w in a.workers.split(",")),
        peers=tuple(x for x in a.peers.split(",") if x),
        ops=tuple(x for x in a.ops.split(",") if x),
        late_rate=a.late_rate,
        drain_window=a.drain_window,
        profile_dir=a.profile,
        profile_gil=a.profile_gil,
        late_seconds=a.late_seconds or (5.0 if a.quick else base.late_seconds),
        peer_venv=a.peer_venv,
        bodies=tuple(x for x in a.body.split(",") if x),
        enqueue_procs=a.enqueue_procs,
        seed_rates=a.seed_rates,
        out=a.out or ROOT / "bench" / "results" / f"runtime{suffix}.json",
        plot=a.plot or ROOT / "docs" / "img" / f"runtime{suffix}.png",
    )


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("--table", "--replot"):
        result = json.loads(Path(argv[1]).read_text())
        if result["meta"]["settings"].get("bodies", "()") != "()":
            return bodies_report.offline(argv[0], result, argv[2:])
        if argv[0] == "--table":
            print(markdown_table(result))
        else:
            replot(result, Path(argv[2]) if len(argv) > 2 else BenchSettings().plot)
        return 0
    settings = parse_args(argv)
    if not (settings.peer_venv / "bin" / "python").exists():
        print(
            f"no peer venv at {settings.peer_venv}: run bash bench/setup_peers.sh", file=sys.stderr
        )
        return 2
    started = time.time()
    logs = Path(tempfile.mkdtemp(prefix="taskscale-bench-logs-"))
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        h = Harness(settings, server.url, client, logs)
        if settings.seed_rates is not None:
            h.seen = seeded_rates(settings.seed_rates)
        meta: dict[str, Any] = {
            "settings": {k: str(v) for k, v in asdict(settings).items()},
            "machine": machine(),
        }
        meta["redis"] = client.info("server")["redis_version"]
        meta["peers"] = describe_peers(h)
        skipped = {p for p, d in meta["peers"].items() if d.get("skip")}
        settings = replace(settings, peers=tuple(p for p in settings.peers if p not in skipped))
        h.settings = settings
        samples = run_all(h)
        client.close()
    meta["loadavg_at_end"] = os.getloadavg()
    meta["duration_s"] = time.time() - started
    if settings.bodies:
        return bodies_report.finish(meta, samples, settings, logs)
    summary = summarize(samples, settings.peers)
    result = {"meta": meta, "summary": summary, "samples": [asdict(x) for x in samples]}
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print_table(summary, settings.peers)
    plot(summary, settings.peers, settings.plot, plot_title(meta["settings"]))
    if settings.profile_dir is not None:
        print_profiles(settings.profile_dir)
    print(f"\nwrote {settings.out} and {settings.plot}; worker logs in {logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
