"""What the dashboard shows, read from Redis with the existing readers.

The overview is :func:`taskscale.status.collect` (the data of ``taskscale
status --json``) plus one more pipelined round trip for what only the
console shows: the age of the oldest ready task per type (the head of each
non-empty priority list) and the delayed tasks due within the next minute.
Rates and sparklines are the browser's job: it polls the counters and keeps
the differences, so the server holds no history.
"""

from __future__ import annotations

import json
from typing import Any

from taskscale import admin, status
from taskscale.catalog import read_catalog
from taskscale.keys import PRIORITY_LEVELS, Keys
from taskscale.redis_urls import RedisClient
from taskscale.scaling import read_scalers
from taskscale.text import as_text

#: "Due soon" on the overview: delayed tasks due within this many ms.
DUE_SOON_MS = 60_000
#: Most keys one fan-out listing SCANs through (fan-outs have no index).
FANOUT_SCAN_LIMIT = 100_000


def _envelope_ms(raw: Any) -> int | None:
    try:
        doc = json.loads(as_text(raw))
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    value = doc.get("due_ms") or doc.get("enqueued_ms")
    return int(value) if isinstance(value, int | float) else None


def overview(client: RedisClient, keys: Keys) -> dict[str, Any]:
    """``status.collect`` with ``oldest_ready_s``, ``due_soon``, ``idle_for_s``,
    ``wait_ms``/``claimed`` and ``dead_lettered`` (the stats counter: every
    task ever dead-lettered, which the browser turns into a rate) per type."""
    found = status.collect(client, keys)
    now_ms = int(found["now"] * 1000)
    names = list(found["types"])
    pipe = client.pipeline(transaction=False)
    heads: list[tuple[str, int]] = []
    for name in names:
        pipe.zcount(keys.delayed(name), now_ms - status.OVERDUE_GRACE_MS, now_ms + DUE_SOON_MS)
    for name in names:
        t = found["types"][name]
        for level in range(PRIORITY_LEVELS):
            if t["queued_by_priority"][level]:
                pipe.lindex(keys.queue(name, level), 0)
                heads.append((name, level))
    replies = pipe.execute() if names else []
    due_soon = dict(zip(names, replies[: len(names)], strict=True))
    oldest: dict[str, int] = {}
    for (name, _), raw in zip(heads, replies[len(names) :], strict=True):
        ms = _envelope_ms(raw) if raw is not None else None
        if ms is not None:
            oldest[name] = min(oldest.get(name, ms), ms)
    for name, t in found["types"].items():
        stats = t.pop("stats")
        t["claimed"] = stats.get("claimed", 0)
        t["wait_ms"] = stats.get("wait_ms", 0)
        t["service_ms"] = stats.get("service_ms", 0)
        t["dead_lettered"] = stats.get("dead", 0)
        t["due_soon"] = int(due_soon.get(name, 0))
        t["oldest_ready_s"] = (now_ms - oldest[name]) / 1000 if name in oldest else None
        idle = t["idle_since"]
        t["idle_for_s"] = None if t["active"] or idle is None else max(0.0, found["now"] - idle)
    return found


def empty_row() -> dict[str, Any]:
    """The overview row of a type nothing was ever enqueued for (a worker serves it)."""
    return {
        "queued": 0,
        "queued_by_priority": [0] * PRIORITY_LEVELS,
        "delayed": 0,
        "active": 0,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
        "dead": 0,
        "overdue": 0,
        "oldest_overdue_s": 0.0,
        "idle_since": None,
        "claimed": 0,
        "wait_ms": 0,
        "service_ms": 0,
        "dead_lettered": 0,
        "due_soon": 0,
        "oldest_ready_s": None,
        "idle_for_s": None,
    }


def type_detail(
    client: RedisClient,
    keys: Keys,
    task_type: str,
    *,
    scalers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One type: its overview row, catalog entry and the scalers that size it
    (from ``scalers`` when given: a sharded deployment's come from every namespace)."""
    found = overview(client, keys)
    catalog = read_catalog(client, keys)
    every = read_scalers(client, keys) if scalers is None else scalers
    scalers = [s for s in every if task_type in s.get("types", [])]
    return {
        "type": task_type,
        "now": found["now"],
        "state": found["types"].get(task_type),
        "catalog": catalog["types"].get(task_type),
        "workers": [w for w in found["workers"] if task_type in w["types"]],
        "scalers": scalers,
    }


def dead_letters(
    client: RedisClient, keys: Keys, task_type: str, *, start: int = 0, count: int = 50
) -> dict[str, Any]:
    letters = admin.dead_list(client, keys, task_type, start=start, count=count)
    return {
        "type": task_type,
        "total": int(client.llen(keys.dead(task_type))),
        "start": start,
        "count": count,
        "letters": [
            {
                "id": d.task_id,
                "error": d.error,
                "failed_ms": d.failed_ms,
                "traceback": d.traceback,
                "envelope": d.envelope,
                "args": d.fields.get("args", []),
                "kwargs": d.fields.get("kwargs", {}),
                "attempts": d.fields.get("attempts", 0),
            }
            for d in letters
        ],
    }


def delayed_tasks(
    client: RedisClient, keys: Keys, task_type: str, *, start: int = 0, count: int = 50
) -> dict[str, Any]:
    tasks = admin.delayed_list(client, keys, task_type, start=start, count=count)
    return {
        "type": task_type,
        "total": int(client.zcard(keys.delayed(task_type))),
        "start": start,
        "count": count,
        "tasks": [
            {
                "id": d.task_id,
                "due_ms": d.due_ms,
                "envelope": d.envelope,
                "args": d.fields.get("args", []),
                "kwargs": d.fields.get("kwargs", {}),
                "attempts": d.fields.get("attempts", 0),
            }
            for d in tasks
        ],
    }


def fanouts(client: RedisClient, keys: Keys, *, limit: int = 200) -> list[dict[str, Any]]:
    """Fan-outs whose state hash still exists (in progress, or done and not
    yet expired), found by SCAN -- at most :data:`FANOUT_SCAN_LIMIT` keys."""
    pattern = keys.fanout("*").replace("{", "\\{").replace("}", "\\}")
    found: list[str] = []
    for examined, key in enumerate(client.scan_iter(match=pattern, count=1000, _type="hash"), 1):
        name = as_text(key)
        if not name.endswith((":pending", ":done")):
            found.append(name)
        if len(found) >= limit or examined >= FANOUT_SCAN_LIMIT:
            break
    pipe = client.pipeline(transaction=False)
    for key in found:
        pipe.hgetall(key)
    out = []
    prefix = keys.fanout("")
    for key, raw in zip(found, pipe.execute() if found else [], strict=True):
        h = {as_text(k): as_text(v) for k, v in raw.items()}
        try:
            total, running = int(h["total"]), int(h["running"])
            succeeded, failed = int(h["succeeded"]), int(h["failed"])
        except (KeyError, ValueError):
            continue
        out.append(
            {
                "id": key[len(prefix) :],
                "type": h.get("type", ""),
                "total": total,
                "limit": int(h.get("limit", 0) or 0),
                "running": running,
                "succeeded": succeeded,
                "failed": failed,
                "pending": total - running - succeeded - failed,
                "done": succeeded + failed == total,
            }
        )
    return sorted(out, key=lambda f: (f["done"], f["id"]))
