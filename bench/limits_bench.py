"""Claim cost with flow control: the old claim.lua beside the new one, and the
Redis cost per task of a rate-limited claim.

    .venv/bin/python -m bench.limits_bench                 # 5 runs, 20k tasks
    .venv/bin/python -m bench.limits_bench --runs 3 --tasks 5000 --json FILE

Every variant drains the same N pre-enqueued tasks of one type with
back-to-back ``EVALSHA`` calls from one connection (no worker threads: the
claim itself is what is measured), on a ``redis-server`` started here,
flushed before each variant.  The variants run interleaved in each run, in
a rotated order, so drift of this shared machine hits all of them alike:

* ``old``: ``claim.lua`` as it was before flow control (``git show
  REF:taskscale/scripts/claim.lua``, REF = ``--baseline-ref``), unlimited type;
* ``new``: the current script, unlimited type (no field in ``{ns}:limits``);
* ``rate b1`` / ``rate b16``: the current script, the type limited to 10^6
  per second (never waiting) with a bucket of 1 / 16 tokens, so a claim of 16
  gets 1 / 16 tasks;
* ``cap``: the current script, a concurrency cap never reached;
* ``held``: the current script, the bucket empty (1 per hour): a claim that
  takes nothing and names the refill -- what a held-back type costs;
* ``paired``: old and new alternating in blocks of 20 calls on one queue
  (unlimited type), client wall time per call, and the median of the
  new / old ratios of neighbouring blocks: the finest interleaving, for a
  difference smaller than the run-to-run noise of a loaded machine.

Figures per variant: tasks per second of wall time (client round trip
included), and from ``INFO commandstats`` (reset before each variant) the
server's microseconds per call and per task.  Medians over runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from taskscale.keys import Keys
from taskscale.luascripts import script_source

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.redis_server import RedisServer  # noqa: E402  (tests/ is not a package)

#: The last commit of main before flow control (its claim.lua is the baseline).
BASELINE_REF = "67a4162"
TYPE = "bench"
WORKER = "bench-worker"

#: name -> (script "old"/"new", limits JSON or None, tasks asked per call)
VARIANTS: dict[str, tuple[str, str | None, int]] = {
    "old k16": ("old", None, 16),
    "new k16": ("new", None, 16),
    "old k1": ("old", None, 1),
    "new k1": ("new", None, 1),
    "rate b1 k16": ("new", '{"rate":1000000,"period_ms":1000,"burst":1}', 16),
    "rate b16 k16": ("new", '{"rate":1000000,"period_ms":1000,"burst":16}', 16),
    "cap k16": ("new", '{"concurrency":1000000000}', 16),
}
HELD = "held k16"


def old_source(ref: str) -> str:
    """The baseline claim.lua: one from before flow control, whose ARGV are
    prefix, worker, k, types (:func:`claim_args` passes it no cap)."""
    source = subprocess.run(
        ["git", "show", f"{ref}:taskscale/scripts/claim.lua"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    if "limits" in source or "dead_cap" in source:
        raise SystemExit(
            f"limits_bench: --baseline-ref {ref}: its claim.lua already has limits or the "
            f"dead-letter cap; pick a commit before flow control (default {BASELINE_REF})"
        )
    return source


def prepare(r: redis.Redis, keys: Keys, tasks: int, limits: str | None) -> None:
    r.flushall()
    pipe = r.pipeline(transaction=False)
    for first in range(0, tasks, 1000):
        envs = [
            json.dumps({"id": f"t{i}", "type": TYPE, "args": [], "enqueued_ms": 0})
            for i in range(first, min(tasks, first + 1000))
        ]
        pipe.rpush(keys.queue(TYPE), *envs)
    pipe.zadd(keys.workers, {WORKER: 2**50})
    if limits is not None:
        pipe.hset(keys.limits, TYPE, limits)
    pipe.execute()
    r.config_resetstat()


def claim_args(keys: Keys, k: int, *, old: bool) -> list[Any]:
    """ARGV of a claim of ``k`` tasks: the current claim.lua takes the
    dead-letter cap (0 here) before the types, the baseline does not."""
    return [keys.prefix, WORKER, k, TYPE] if old else [keys.prefix, WORKER, k, 0, TYPE]


def drain(
    r: redis.Redis, keys: Keys, sha: str, k: int, calls: int | None, *, old: bool = False
) -> tuple[int, int]:
    """Claim until the queue is empty (or ``calls`` calls); return (calls, tasks)."""
    script_keys = [keys.active, keys.workers, keys.inflight(WORKER), keys.limits]
    args = claim_args(keys, k, old=old)
    made = got = 0
    while calls is None or made < calls:
        reply = r.evalsha(sha, len(script_keys), *script_keys, *args)
        made += 1
        header = 2 if len(reply) % 3 == 2 else 3
        taken = (len(reply) - header) // 3
        got += taken
        if calls is None and taken == 0:
            break
    return made, got


def server_usec(r: redis.Redis) -> tuple[int, int]:
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def server_cpu_s(r: redis.Redis) -> float:
    """CPU seconds of Redis's main thread (user + sys): unlike commandstats'
    wall-clock usec, not inflated while the process waits for a core."""
    cpu = r.info("cpu")
    return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"])


def measure(
    r: redis.Redis,
    keys: Keys,
    sha: str,
    tasks: int,
    limits: str | None,
    k: int,
    calls: int | None,
    *,
    old: bool = False,
) -> dict[str, float]:
    prepare(r, keys, tasks, limits)
    cpu0 = server_cpu_s(r)
    t0 = time.perf_counter()
    made, got = drain(r, keys, sha, k, calls, old=old)
    wall = time.perf_counter() - t0
    cpu = server_cpu_s(r) - cpu0
    n_calls, usec = server_usec(r)
    return {
        "calls": made,
        "tasks": got,
        "tasks_per_s": got / wall if got else 0.0,
        "calls_per_s": made / wall,
        "usec_per_call": usec / max(1, n_calls),
        "usec_per_task": usec / got if got else 0.0,
        # includes the two INFO calls and the round trips' read/write work
        "cpu_usec_per_call": cpu * 1e6 / made,
        "cpu_usec_per_task": cpu * 1e6 / got if got else 0.0,
    }


def paired(
    r: redis.Redis, keys: Keys, sha: dict[str, str], k: int, blocks: int, calls: int
) -> dict[str, float]:
    """Old and new claim.lua alternating in blocks of ``calls`` calls on one
    queue (the first of each pair alternates too), so the load on this shared
    machine hits both alike; returns the median µs per call (client wall
    time, round trip included) of each and the median of the paired ratios."""
    prepare(r, keys, 2 * blocks * calls * k, None)
    script_keys = [keys.active, keys.workers, keys.inflight(WORKER), keys.limits]
    args = {name: claim_args(keys, k, old=name == "old") for name in ("old", "new")}
    per_call: dict[str, list[float]] = {"old": [], "new": []}
    ratios = []
    for b in range(blocks):
        pair = ("old", "new") if b % 2 == 0 else ("new", "old")
        for name in pair:
            t0 = time.perf_counter()
            for _ in range(calls):
                r.evalsha(sha[name], len(script_keys), *script_keys, *args[name])
            per_call[name].append((time.perf_counter() - t0) * 1e6 / calls)
        ratios.append(per_call["new"][-1] / per_call["old"][-1])
    return {
        "old_usec_per_call": statistics.median(per_call["old"]),
        "new_usec_per_call": statistics.median(per_call["new"]),
        "new_over_old": statistics.median(ratios),
    }


def run(runs: int, tasks: int, ref: str) -> dict[str, Any]:
    names_all = [*VARIANTS, HELD, "paired k1", "paired k16"]
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in names_all}
    keys = Keys("bench")
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        sha = {"old": r.script_load(old_source(ref)), "new": r.script_load(script_source("claim"))}
        names = list(VARIANTS)
        for i in range(runs):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                script, limits, k = VARIANTS[name]
                samples[name].append(
                    measure(r, keys, sha[script], tasks, limits, k, None, old=script == "old")
                )
            held = '{"rate":1,"period_ms":3600000,"burst":1}'
            r.hset(keys.limits, TYPE, held)
            samples[HELD].append(measure(r, keys, sha["new"], tasks, held, 16, 1 + tasks // 4))
            for k in (1, 16):
                samples[f"paired k{k}"].append(paired(r, keys, sha, k, blocks=200, calls=20))
            print(f"run {i + 1}/{runs} done", file=sys.stderr)
        r.close()
    return {
        "runs": runs,
        "tasks": tasks,
        "baseline_ref": ref,
        "medians": {
            name: {f: statistics.median(s[f] for s in rows) for f in rows[0]}
            for name, rows in samples.items()
        },
        "samples": samples,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| variant | tasks/s (wall) | calls/s | server µs per call | server µs per task "
        "| Redis CPU µs per call | Redis CPU µs per task |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in result["medians"].items():
        if name.startswith("paired"):
            continue
        held = name == HELD
        per_task = "-" if held else f"{m['usec_per_task']:.2f}"
        cpu_task = "-" if held else f"{m['cpu_usec_per_task']:.2f}"
        tasks_per_s = "-" if held else f"{m['tasks_per_s']:,.0f}"
        lines.append(
            f"| {name} | {tasks_per_s} | {m['calls_per_s']:,.0f} | "
            f"{m['usec_per_call']:.1f} | {per_task} | {m['cpu_usec_per_call']:.1f} | {cpu_task} |"
        )
    lines += [
        "",
        "| paired, blocks of 20 calls | old µs per call | new µs per call | new / old |",
        "|---|---|---|---|",
    ]
    for k in (1, 16):
        m = result["medians"][f"paired k{k}"]
        lines.append(
            f"| k = {k} | {m['old_usec_per_call']:.1f} | {m['new_usec_per_call']:.1f} "
            f"| {m['new_over_old']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--baseline-ref", default=BASELINE_REF)
    p.add_argument("--json", type=Path, default=None, help="write the samples here")
    args = p.parse_args(argv)
    result = run(args.runs, args.tasks, args.baseline_ref)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
