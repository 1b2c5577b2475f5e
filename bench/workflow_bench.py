"""The cost of a workflow step beside a plain task: Redis calls and CPU.

    .venv/bin/python -m bench.workflow_bench                  # 3 runs, 3000 steps
    .venv/bin/python -m bench.workflow_bench --runs 5 --steps 6000 --json FILE

One ``taskscale worker`` process (8 threads, the ``noop`` task of
taskscale.examples) on a ``redis-server`` started here.  Each variant runs
the same number of task runs (steps), interleaved with the others in every
run in a rotated order, so drift of this shared machine hits all alike:

* ``plain``: N ``noop`` tasks, enqueued with ``enqueue_many`` (batches of 500);
* ``chain3``: N / 3 chains of 3 ``noop`` steps (each step gets the previous
  result), one ``workflow_submit`` call each;
* ``group10``: N / 10 groups of 10 ``noop`` steps.

The worker is started and idle before the clock starts; from the reset of
``INFO commandstats`` to the last completion (counted by polling one field,
whose polls are subtracted) the figures per step are: every Redis command
(the producer's, the worker's), the script calls among them, the server's
µs inside commands (commandstats), and the worker's CPU (user + system,
the process and its children, from /proc).  Medians over runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from taskscale.keys import Keys
from taskscale.producer import Call, Producer
from taskscale.workflows import chain, group

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from bench.runtime_procs import groups_cpu, stop_groups  # noqa: E402
from support.redis_server import RedisServer  # noqa: E402  (tests/ is not a package)
from support.workers import taskscale_process, worker_argv  # noqa: E402

KEYS = Keys("taskscale")
VARIANTS = ("plain", "chain3", "group10")


def submit(r: redis.Redis, variant: str, steps: int) -> Callable[[], bool]:
    """Enqueue ``steps`` runs of ``variant``; return the 'all done' check."""
    if variant == "plain":
        producer = Producer(r, keys=KEYS)
        for first in range(0, steps, 500):
            producer.enqueue_many("noop", [Call() for _ in range(first, min(steps, first + 500))])
        return lambda: int(r.hget(KEYS.stats("noop"), "completed") or 0) >= steps
    size = 3 if variant == "chain3" else 10
    build = (lambda: chain(*["noop"] * 3)) if size == 3 else (lambda: group(*["noop"] * 10))
    for _ in range(steps // size):
        build().enqueue(client=r, keys=KEYS)
    return lambda: int(r.hget(KEYS.workflow_totals, "succeeded") or 0) >= steps // size


def measure(r: redis.Redis, worker: Any, variant: str, steps: int) -> dict[str, float]:
    r.delete(KEYS.stats("noop"), KEYS.workflow_totals)
    r.config_resetstat()
    cpu0 = groups_cpu([worker])
    t0 = time.perf_counter()
    done = submit(r, variant, steps)
    polls = 0
    while not done():
        polls += 1
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    cpu = groups_cpu([worker]) - cpu0
    stats = r.info("commandstats")
    polls += 1  # the last, successful check
    calls = sum(int(v["calls"]) for v in stats.values()) - polls
    usec = sum(int(v["usec"]) for v in stats.values())
    scripts = sum(
        int(stats.get(k, {}).get("calls", 0)) for k in ("cmdstat_evalsha", "cmdstat_eval")
    )
    script_usec = sum(
        int(stats.get(k, {}).get("usec", 0)) for k in ("cmdstat_evalsha", "cmdstat_eval")
    )
    by_command = {k[8:]: int(v["calls"]) / steps for k, v in stats.items()}
    by_command["hget"] = by_command.get("hget", 0) - polls / steps
    return {
        "by_command": by_command,  # type: ignore[dict-item]
        "steps_per_s": steps / wall,
        "commands_per_step": calls / steps,
        "script_calls_per_step": scripts / steps,
        "server_usec_per_step": usec / steps,
        "script_usec_per_step": script_usec / steps,
        "worker_cpu_usec_per_step": cpu * 1e6 / steps,
    }


def run(runs: int, steps: int) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        argv = worker_argv("noop", "taskscale.examples", threads=8, idle_wait=0.5)
        worker = taskscale_process(server.url, *argv, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not r.zcard(KEYS.workers):
                if time.monotonic() > deadline:
                    raise SystemExit("workflow_bench: the worker did not register")
                time.sleep(0.1)
            measure(r, worker, "plain", 300)  # warm-up: imports, script loads
            measure(r, worker, "chain3", 300)
            for i in range(runs):
                order = VARIANTS[i % 3 :] + VARIANTS[: i % 3]
                for variant in order:
                    samples[variant].append(measure(r, worker, variant, steps))
                    print(variant, json.dumps(samples[variant][-1]), flush=True)
        finally:
            stop_groups([worker])
    medians = {
        v: {
            k: statistics.median(s[k] for s in samples[v])
            for k in samples[v][0]
            if k != "by_command"
        }
        for v in VARIANTS
    }
    return {"runs": runs, "steps": steps, "medians": medians, "samples": samples}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--steps", type=int, default=3000, help="task runs per variant (a multiple of 30)"
    )
    p.add_argument("--json", type=Path, default=None, help="write the samples here")
    args = p.parse_args(argv)
    result = run(args.runs, args.steps)
    print(
        "| variant | steps/s | Redis commands per step | script calls per step "
        "| server µs per step | worker CPU µs per step |"
    )
    print("|---|---|---|---|---|---|")
    for v, m in result["medians"].items():
        print(
            f"| {v} | {m['steps_per_s']:.0f} | {m['commands_per_step']:.2f} | "
            f"{m['script_calls_per_step']:.2f} | {m['server_usec_per_step']:.1f} | "
            f"{m['worker_cpu_usec_per_step']:.0f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
