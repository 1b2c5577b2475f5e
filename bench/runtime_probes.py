"""What the runtime benchmark reads back from Redis: the probes every task
body stamps (counts, first start, last end), waiting for a count, delayed
tasks' lateness, Redis's CPU and command statistics."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from bench.peers.probe import LATE_KEY, PROBE_KEY_PREFIX, PROBES_KEY
from bench.runtime_settings import POLL_INTERVAL, PeerFailed, text


@dataclass(frozen=True)
class ProbeTotals:
    count: int
    first: float
    last: float
    #: Worker processes that have finished a task (one probe each).
    processes: int = 0


def read_probes(client: redis.Redis) -> ProbeTotals:
    ids = sorted(client.smembers(PROBES_KEY))
    if not ids:
        return ProbeTotals(0, 0.0, 0.0)
    pipe = client.pipeline(transaction=False)
    for probe_id in ids:
        pipe.hgetall(PROBE_KEY_PREFIX + text(probe_id))
    rows = [row for row in pipe.execute() if row]
    firsts = [float(r[b"first"]) for r in rows if float(r[b"first"]) > 0]
    return ProbeTotals(
        count=sum(int(r[b"count"]) for r in rows),
        first=min(firsts, default=0.0),
        last=max((float(r[b"last"]) for r in rows), default=0.0),
        processes=sum(1 for r in rows if int(r[b"count"]) > 0),
    )


def wait_for_count(
    client: redis.Redis,
    target: int,
    *,
    timeout: float,
    procs: Sequence[subprocess.Popen[bytes]],
    window: float | None = None,
    on_first: Any = None,
    processes: int = 1,
) -> ProbeTotals:
    """Poll the probes until ``target`` tasks are done, or until ``window``
    seconds after the first task started; PeerFailed on timeout or when a
    worker process exits early. ``on_first(totals)`` is called at the first
    poll that sees a finished task from each of ``processes`` worker
    processes (so no worker's start-up -- imports -- falls after it)."""
    deadline = time.monotonic() + timeout
    totals = read_probes(client)
    while totals.count < target:
        if on_first is not None and totals.count and totals.processes >= processes:
            on_first(totals)
            on_first = None
        if window is not None and totals.first and time.time() - totals.first > window:
            break
        if time.monotonic() > deadline:
            raise PeerFailed(f"timed out after {timeout:.0f} s: {totals.count}/{target} done")
        dead = [str(p.args) for p in procs if p.poll() is not None]
        if dead:
            raise PeerFailed(f"worker exited early ({totals.count}/{target} done): {dead[0]}")
        time.sleep(POLL_INTERVAL)
        totals = read_probes(client)
    time.sleep(0.15)  # let every probe flush its last stamp
    return read_probes(client)


def redis_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def cpu_per_task(
    marks: Sequence[tuple[ProbeTotals, float, float]], totals: ProbeTotals, end: float, at: int
) -> float | None:
    """Microseconds of CPU per task between the first mark and the end."""
    if not marks or totals.count <= marks[0][0].count:
        return None
    spent = end - marks[0][at]
    return spent / (totals.count - marks[0][0].count) * 1e6


def read_lateness(client: redis.Redis) -> list[float]:
    values: list[float] = []
    for chunk in client.lrange(LATE_KEY, 0, -1):
        values.extend(json.loads(chunk))
    return values


def redis_commandstats(client: redis.Redis) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {}
    for name, row in client.info("commandstats").items():
        stats[name.removeprefix("cmdstat_")] = {
            "calls": float(row["calls"]),
            "usec": float(row["usec"]),
        }
    return stats


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
