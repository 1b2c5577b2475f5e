"""The console's readers of the history kept in Redis (taskscale.history):
a type's buckets or every type's summed, and each type's rates over the last
minute, so the overview shows real rates on its first load instead of the
difference between two refreshes."""

from __future__ import annotations

from typing import Any

from taskscale import history
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import server_time
from taskscale.shards import ShardMap
from taskscale.text import as_text

#: The windows the history page offers, seconds -> label.
WINDOWS = {600: "10 min", 3600: "1 h", 6 * 3600: "6 h", 86400: "24 h"}
#: Buckets the overview's rates read: the last full minute and the current,
#: partial bucket (31 buckets cost 66 ms at 1000 types, 7 cost a fifth).
RATE_BUCKETS = 7


def _types(client: RedisClient, keys: Keys) -> list[str]:
    return sorted(as_text(t) for t in client.smembers(keys.types))


def read(
    client: RedisClient, shards: ShardMap, task_type: str | None, since_s: int
) -> dict[str, Any]:
    """``task_type``'s buckets of the last ``since_s`` s, or every type's summed
    (``None``), oldest first, as JSON rows."""
    rows: list[history.Row] = []
    namespaces = [shards.keys_for(task_type)] if task_type else [Keys(n) for n in shards.namespaces]
    for keys in namespaces:
        names = [task_type] if task_type else _types(client, keys)
        if not names:
            continue
        now = server_time(client, keys).ms
        found = history.read(client, keys, names, since_s, now_ms=now)
        rows = found if not rows else [_sum(a, b) for a, b in zip(rows, found, strict=False)]
    return {
        "type": task_type,
        "bucket_s": history.BUCKET_S,
        "since_s": since_s,
        "rows": [r.as_json() for r in rows],
    }


def _sum(a: history.Row, b: history.Row) -> history.Row:
    out = history.Row(a.at, a.completed + b.completed, a.failed + b.failed, a.dead + b.dead)
    out.queued, out.running = a.queued + b.queued, a.running + b.running
    # percentiles of a sum need the bins: the namespaces' rows keep theirs
    for mine, *theirs in ((out.wait_hist, a.wait_hist, b.wait_hist),
                          (out.run_hist, a.run_hist, b.run_hist)):  # fmt: skip
        for hist in theirs:
            for i, n in hist.items():
                mine[i] = mine.get(i, 0) + n
    out.wait_p50_ms = history.percentile(out.wait_hist, 0.5)
    out.wait_p95_ms = history.percentile(out.wait_hist, 0.95)
    out.run_p50_ms = history.percentile(out.run_hist, 0.5)
    out.run_p95_ms = history.percentile(out.run_hist, 0.95)
    return out


def rates(client: RedisClient, shards: ShardMap) -> dict[str, dict[str, Any]]:
    """Per type: completed, failed and dead per second over the last full
    minute of history, and completed/s of each of its six full buckets."""
    out: dict[str, dict[str, Any]] = {}
    for namespace in shards.namespaces:
        keys = Keys(namespace)
        names = _types(client, keys)
        if not names:
            continue
        now = server_time(client, keys).ms
        last = history.current_bucket(now)
        first = last - RATE_BUCKETS + 1
        replies = history.counts(client, keys, names, first, last)
        for name, per_bucket in zip(names, replies, strict=True):
            counts = per_bucket[:-1]  # the current bucket is partial
            minute = counts[-6:]
            span = len(minute) * history.BUCKET_S
            out[name] = {
                "completed_per_s": sum(c[0] for c in minute) / span,
                "failed_per_s": sum(c[1] for c in minute) / span,
                "dead_per_s": sum(c[2] for c in minute) / span,
                "done_per_s": [c[0] / history.BUCKET_S for c in counts],
            }
    return out
