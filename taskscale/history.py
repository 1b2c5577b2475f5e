"""Per-type history kept in Redis: 10 s buckets for 24 h, no extra process.

Workers count what they record (completed, failed runs, dead letters) and
the queue wait and run time of each run in a small log-scale histogram per
bucket, and write it once per heartbeat with ``history_add.lua`` -- one call
for every type and bucket, never one per task.  Schedulers sample queued and
running once per bucket with ``history_sample.lua``.  Each bucket is one
hash ``{ns}:history:T:B`` (``B`` = unix seconds // 10 on the Redis clock)
that expires 24 h after its first write, so memory is bounded by the buckets
of one day (docs/schema.md, "History").  Percentiles are derived on read.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text

#: Seconds per bucket, and how long a bucket lives.
BUCKET_S = 10
KEEP_S = 24 * 3600
#: Histogram bins: bin 0 holds runs under 1 ms, bin i (1..BINS-1) runs of
#: [R**(i-1), R**i) ms, the last one everything longer (R = sqrt 2: bins
#: ~41 % wide; 48 bins reach 2**23.5 ms, about 3.3 h).
RATIO = math.sqrt(2.0)
BINS = 48
#: A bucket's fields: counts, the scheduler's samples, then "w<i>" (queue
#: wait) and "s<i>" (run time) histogram bins.
COUNTS = ("completed", "failed", "dead")
SAMPLES = ("queued", "running")
_SHORT = {"completed": "c", "failed": "f", "dead": "d", "queued": "q", "running": "r"}


def _edge(i: float) -> float:
    """RATIO to the power ``i``: a bin's edge in ms (exp/log, so the backoff
    one-way check, which looks for ``**``, sees no second backoff here)."""
    return math.exp(i * math.log(RATIO))


def _bin_by_log(ms: float) -> int:
    if ms < 1:
        return 0
    return min(BINS - 1, 1 + int(math.log(ms, RATIO)))


#: The bins of whole ms below 8192, looked up (the reporter bins every run twice).
_SMALL = [_bin_by_log(ms) for ms in range(8192)]


def bin_of(ms: float) -> int:
    """The histogram bin of a duration in ms."""
    if isinstance(ms, int) and 0 <= ms < 8192:
        return _SMALL[ms]
    return _bin_by_log(ms)


def percentile(hist: Mapping[int, int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a histogram, interpolated inside its bin
    on the log scale; ``None`` when it is empty."""
    total = sum(hist.values())
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i in sorted(hist):
        count = hist[i]
        if count <= 0:
            continue
        if seen + count >= rank:
            if i == 0:
                return 1.0
            low = _edge(i - 1)
            frac = (rank - seen) / count
            return round(low * _edge(frac), 1)
        seen += count
    return round(_edge(max(hist) or 1), 1)


def current_bucket(now_ms: int) -> int:
    return now_ms // 1000 // BUCKET_S


#: A recent run: id, outcome ("completed", "retried", "dead"), run ms,
#: finished (unix ms, the worker's clock), the result's or error's start.
Recent = tuple[str, str, int, int, str]


@dataclass
class Batch:
    """What one worker counted since its last history write, and its most
    recent runs per type (reporter thread only; both bounded: types x fields,
    types x ``recent_cap``)."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    recent_cap: int = 0
    recent: dict[str, deque[Recent]] = field(default_factory=dict)

    def finished(self, task_type: str, run: Recent) -> None:
        """One run for ``recent:T`` (kept only while ``recent_cap`` > 0; encoded
        at the write, so a run the cap pushes out costs no JSON)."""
        if self.recent_cap > 0:
            kept = self.recent.get(task_type)
            if kept is None:
                kept = self.recent[task_type] = deque(maxlen=self.recent_cap)
            kept.append(run)

    def add(self, task_type: str, kind: str, service_ms: int, wait_ms: int) -> None:
        """One recorded run: ``kind`` "ok", "retry" or "dead"; ``wait_ms`` < 0 = unknown."""
        c = self.counts
        fields = ["c"] if kind == "ok" else ["f", "d"] if kind == "dead" else ["f"]
        fields.append(f"s{bin_of(service_ms)}")
        if wait_ms >= 0:
            fields.append(f"w{bin_of(wait_ms)}")
        for name in fields:
            c[(task_type, name)] = c.get((task_type, name), 0) + 1

    def args(self, keys: Keys) -> list[Any]:
        """ARGV of ``history_add.lua`` for this batch (empty when nothing was counted)."""
        if not self.counts and not self.recent:
            return []
        out: list[Any] = [keys.prefix, KEEP_S, self.recent_cap, len(self.counts)]
        for (task_type, name), n in sorted(self.counts.items()):
            out += [task_type, name, n]
        for task_type, runs in self.recent.items():
            for task_id, outcome, ms, finished_ms, result in runs:
                record = {"id": task_id, "outcome": outcome, "ms": ms,
                          "finished_ms": finished_ms, "result": result}  # fmt: skip
                out += [task_type, json.dumps(record, separators=(",", ":"))]
        return out

    def clear(self) -> None:
        self.counts.clear()
        self.recent.clear()


def write(client: RedisClient, keys: Keys, batch: Batch) -> None:
    """Add ``batch`` to the current bucket of each of its types, in one call."""
    args = batch.args(keys)
    if args:
        bound_script(client, "history_add")(keys=[keys.types], args=args, client=client)
        batch.clear()


def sample(client: RedisClient, keys: Keys) -> int:
    """Record queued and running of every type in this bucket, unless a
    scheduler did already; return how many types were written (idle ones are not)."""
    reply = bound_script(client, "history_sample")(
        keys=[keys.types, keys.active, keys.history_sampled],
        args=[keys.prefix, KEEP_S],
        client=client,
    )
    return int(reply)


@dataclass
class Row:
    """One bucket of one type (or of all types summed), as `taskscale stats` prints it."""

    at: int  #: the bucket's start, unix seconds
    completed: int = 0
    failed: int = 0
    dead: int = 0
    queued: int = 0  #: sampled by a scheduler (0 when nothing was queued or running)
    running: int = 0
    wait_p50_ms: float | None = None
    wait_p95_ms: float | None = None
    run_p50_ms: float | None = None
    run_p95_ms: float | None = None
    wait_hist: dict[int, int] = field(default_factory=dict, repr=False)
    run_hist: dict[int, int] = field(default_factory=dict, repr=False)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["wait_hist"], out["run_hist"]
        return out


def _row(at: int, flat: list[Any]) -> Row:
    row = Row(at)
    for i in range(0, len(flat) - 1, 2):
        name, value = as_text(flat[i]), int(flat[i + 1])
        if name == "c":
            row.completed = value
        elif name == "f":
            row.failed = value
        elif name == "d":
            row.dead = value
        elif name == "q":
            row.queued = value
        elif name == "r":
            row.running = value
        elif name[:1] in ("w", "s") and name[1:].isdigit():
            hist = row.wait_hist if name[0] == "w" else row.run_hist
            hist[int(name[1:])] = value
    return row


def _finish(row: Row) -> Row:
    row.wait_p50_ms, row.wait_p95_ms = (
        percentile(row.wait_hist, 0.5),
        percentile(row.wait_hist, 0.95),
    )
    row.run_p50_ms, row.run_p95_ms = percentile(row.run_hist, 0.5), percentile(row.run_hist, 0.95)
    return row


def read(
    client: RedisClient, keys: Keys, types: Iterable[str], since_s: int, *, now_ms: int
) -> list[Row]:
    """The buckets of the last ``since_s`` seconds (oldest first), of ``types``
    summed (one type for a type's history, every type for the overall one)."""
    last = current_bucket(now_ms)
    first = last - max(1, min(since_s, KEEP_S) // BUCKET_S) + 1
    replies = buckets(client, keys, list(types), first, last)
    rows = [Row((first + i) * BUCKET_S) for i in range(last - first + 1)]
    for per_type in replies:
        for i, flat in enumerate(per_type):
            if flat:
                _add(rows[i], _row(rows[i].at, flat))
    return [_finish(r) for r in rows]


def buckets(
    client: RedisClient, keys: Keys, types: list[str], first: int, last: int
) -> list[list[list[Any]]]:
    """Per type, per bucket ``first..last``, the bucket hash as a flat HGETALL
    reply: one ``history_read`` call."""
    reply = bound_script(client, "history_read")(
        keys=[keys.types], args=[keys.prefix, first, last, "all", *types], client=client
    )
    return list(reply)


def counts(
    client: RedisClient, keys: Keys, types: list[str], first: int, last: int
) -> list[list[tuple[int, int, int]]]:
    """Per type, per bucket ``first..last``: (completed, failed, dead) -- the
    overview's rates for every type, a fraction of :func:`buckets`' reply."""
    reply = bound_script(client, "history_read")(
        keys=[keys.types], args=[keys.prefix, first, last, "counts", *types], client=client
    )
    return [
        [(int(flat[j]), int(flat[j + 1]), int(flat[j + 2])) for j in range(0, len(flat), 3)]
        for flat in reply
    ]


def _add(into: Row, row: Row) -> None:
    into.completed += row.completed
    into.failed += row.failed
    into.dead += row.dead
    into.queued += row.queued
    into.running += row.running
    for mine, theirs in ((into.wait_hist, row.wait_hist), (into.run_hist, row.run_hist)):
        for i, n in theirs.items():
            mine[i] = mine.get(i, 0) + n


def rate_per_s(rows: list[Row], window_s: int = 60) -> float:
    """Completed tasks per second over the last full ``window_s`` (the current,
    partial bucket left out)."""
    n = max(1, window_s // BUCKET_S)
    full = rows[-n - 1 : -1] if len(rows) > n else rows[:-1]
    if not full:
        return 0.0
    return sum(r.completed for r in full) / (len(full) * BUCKET_S)
