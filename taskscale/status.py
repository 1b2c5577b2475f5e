"""What ``taskscale status`` shows: per-type queue state and live workers.

:func:`collect` reads everything in a few pipelined round trips and returns a
plain dict (the ``--json`` output, also handy in tests and the demo);
:func:`render` turns it into the tables a person reads (types, workers, and
the periodic schedules when there are any).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import redis

from taskscale.durations import span
from taskscale.keys import PRIORITY_LEVELS, Keys
from taskscale.limits import TypeLimits, parse_limits
from taskscale.pausing import parse_paused
from taskscale.redis_urls import RedisClient
from taskscale.scheduling.schedules import list_schedules
from taskscale.scheduling.schedules import render as render_schedules
from taskscale.server_clock import server_time
from taskscale.text import as_text

#: A delayed task due longer ago than this counts as overdue in the status.
OVERDUE_GRACE_MS = 2000

#: While schedulers are alive, a type whose earliest due delayed task is
#: overdue by more than this is a warning: a stuck or lagging scheduler (a
#: live one promotes a due task within milliseconds).
OVERDUE_WARN_S = 30.0


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def collect(client: RedisClient, keys: Keys) -> dict[str, Any]:
    """``{"types": {T: {...}}, "workers": [...], "now": unix s}`` (see docs/schema.md).

    Three round trips: names and counters, the server's clock, and the
    per-type and per-worker reads (pipelines; on a cluster they all go to
    the namespace's one node, its keys sharing one hash tag)."""
    pipe = client.pipeline(transaction=False)
    pipe.smembers(keys.types)
    pipe.hgetall(keys.active)
    pipe.hgetall(keys.idle_since)
    pipe.zrange(keys.workers, 0, -1, withscores=True)
    pipe.hgetall(keys.limits)
    pipe.hgetall(keys.paused)
    wrong: dict[str, str] = {}  # key -> the type taskscale keeps there
    first: list[tuple[str, str, Any]] = [
        (keys.types, "set", set()),
        (keys.active, "hash", {}),
        (keys.idle_since, "hash", {}),
        (keys.workers, "zset", []),
        (keys.limits, "hash", {}),
        (keys.paused, "hash", {}),
    ]
    members, active, idle, workers, raw_limits, raw_paused = _read(pipe, first, wrong)
    paused = parse_paused(raw_paused)
    # the clock of the server holding the namespace: a call of its own (a
    # cluster pipeline takes neither TIME nor EVAL)
    now = server_time(client, keys)
    now_ms = now.ms
    limits = parse_limits(raw_limits)
    names = sorted({as_text(t) for t in (*members, *active, *idle)} | set(limits) | set(paused))
    pipe = client.pipeline(transaction=False)
    reads: list[tuple[str, str, Any]] = []
    for name in names:
        for level in range(PRIORITY_LEVELS):
            pipe.llen(keys.queue(name, level))
            reads.append((keys.queue(name, level), "list", 0))
        pipe.zcard(keys.delayed(name))
        pipe.llen(keys.dead(name))
        pipe.zcount(keys.delayed(name), "-inf", now_ms - OVERDUE_GRACE_MS)
        pipe.zrange(keys.delayed(name), 0, 0, withscores=True)  # the earliest due
        pipe.hgetall(keys.stats(name))
        delayed, dead, skey = keys.delayed(name), keys.dead(name), keys.stats(name)
        reads += [(delayed, "zset", 0), (dead, "list", 0), (delayed, "zset", 0)]
        reads += [(delayed, "zset", []), (skey, "hash", {})]
    for worker_id, _ in workers:
        pipe.hgetall(keys.worker(as_text(worker_id)))
        reads.append((keys.worker(as_text(worker_id)), "hash", {}))
    pipe.zrangebyscore(keys.schedulers, now_ms, "+inf")
    pipe.zcount(keys.fanouts_open, now_ms, "+inf")
    reads += [(keys.schedulers, "zset", []), (keys.fanouts_open, "zset", 0)]
    *replies, schedulers, open_fanouts = _read(pipe, reads, wrong)
    per_type = PRIORITY_LEVELS + 5
    active_by = {as_text(k): _int(v) for k, v in active.items()}
    idle_by = {as_text(k): float(v) for k, v in idle.items()}
    types: dict[str, Any] = {}
    for i, name in enumerate(names):
        chunk = replies[i * per_type : (i + 1) * per_type]
        stats = {as_text(k): _int(v) for k, v in chunk[-1].items()}
        types[name] = {
            "queued": sum(chunk[:PRIORITY_LEVELS]),
            "queued_by_priority": list(chunk[:PRIORITY_LEVELS]),
            "delayed": chunk[PRIORITY_LEVELS],
            "active": active_by.get(name, 0),
            "completed": stats.get("completed", 0),
            "failed": stats.get("failed", 0),
            "cancelled": stats.get("cancelled", 0),
            "dead": chunk[PRIORITY_LEVELS + 1],
            "overdue": chunk[PRIORITY_LEVELS + 2],
            "oldest_overdue_s": _overdue_s(chunk[PRIORITY_LEVELS + 3], now_ms),
            "idle_since": idle_by.get(name),
            "stats": stats,
            "limits": limits_view(limits.get(name)),
            "paused_since_ms": paused.get(name),  # None: not paused (taskscale types pause)
        }
    records = replies[len(names) * per_type :]
    live_workers = [
        worker_view(as_text(wid), lease, record)
        for (wid, lease), record in zip(workers, records, strict=True)
    ]
    status: dict[str, Any] = {
        "now": now.unix_s,
        "types": types,
        "workers": live_workers,
        "schedulers": sorted(as_text(s) for s in schedulers),
        "schedules": [s.as_dict() for s in list_schedules(client, keys)],
        "open_fanouts": open_fanouts,
    }
    status["wrong_type_keys"] = {
        key: f"{as_text(client.type(key))} where taskscale keeps a {wanted}"
        for key, wanted in sorted(wrong.items())
    }
    status["warnings"] = warnings(status, now_ms)
    return status


def _read(pipe: Any, reads: list[tuple[str, str, Any]], wrong: dict[str, str]) -> list[Any]:
    """The pipeline's replies, a key of the wrong type read as empty and noted
    in ``wrong`` (key -> the type taskscale keeps there): the status still
    shows everything else, and warns (docs/operating.md, "A key of the wrong type")."""
    replies = pipe.execute(raise_on_error=False)
    out = []
    for reply, (key, wanted, empty) in zip(replies, reads, strict=True):
        if isinstance(reply, redis.ResponseError) and "WRONGTYPE" in str(reply):
            wrong[key] = wanted
            reply = empty
        elif isinstance(reply, Exception):
            raise reply
        out.append(reply)
    return out


def _overdue_s(earliest: list[tuple[Any, float]], now_ms: int) -> float:
    """Seconds the earliest due delayed task is past its due time (0: none due)."""
    if not earliest:
        return 0.0
    return max(0.0, (now_ms - float(earliest[0][1])) / 1000)


#: Per-type numbers that add up across namespaces (a type normally lives in one).
SUMMED = ("queued", "delayed", "active", "completed", "failed", "cancelled", "dead", "overdue")


View = TypeVar("View")


def read_namespaces(
    namespaces: Sequence[str],
    read: Callable[[Keys], View],
    merge: Callable[[Sequence[tuple[str, View]]], View],
) -> View:
    """``read`` of every namespace of a (sharded) deployment: one namespace's
    answer as it is, several merged by ``merge`` from (namespace, answer)
    pairs in the listed order.  The status and every console reader use it."""
    parts = [(ns, read(Keys(ns))) for ns in namespaces]
    return parts[0][1] if len(parts) == 1 else merge(parts)


def collect_namespaces(client: RedisClient, namespaces: Sequence[str]) -> dict[str, Any]:
    """:func:`collect` for each namespace of a sharded deployment, merged
    (:func:`merge_namespaces`)."""
    return read_namespaces(namespaces, partial(collect, client), merge_namespaces)


def merge_namespaces(
    parts: Sequence[tuple[str, dict[str, Any]]], *, summed: Sequence[str] = SUMMED
) -> dict[str, Any]:
    """What :func:`collect` (or a reader built on it) found in each namespace,
    merged: the types of all of them (the ``summed`` numbers and the ready
    tasks by priority added up should a type appear in several), every worker
    and scheduler with a ``namespace`` field, every warning prefixed with its
    namespace.  ``"namespaces"`` lists what was read."""
    merged: dict[str, Any] = {
        "namespaces": [ns for ns, _ in parts],
        "types": {},
        "workers": [],
        "schedulers": [],
        "warnings": [],
        "open_fanouts": 0,
    }
    for ns, one in parts:
        merged["now"] = max(merged.get("now", 0.0), one["now"])
        merged["open_fanouts"] += one["open_fanouts"]
        for name, t in one["types"].items():
            have = merged["types"].get(name)
            if have is None:
                merged["types"][name] = t
                continue
            for field in summed:
                have[field] += t[field]
            have["oldest_overdue_s"] = max(have["oldest_overdue_s"], t["oldest_overdue_s"])
            by_level = zip(have["queued_by_priority"], t["queued_by_priority"], strict=True)
            have["queued_by_priority"] = [a + b for a, b in by_level]
            have["idle_since"] = max(
                (x for x in (have["idle_since"], t["idle_since"]) if x is not None), default=None
            )
        merged["workers"] += [{**w, "namespace": ns} for w in one["workers"]]
        merged["schedulers"] += [f"{ns}/{s}" for s in one["schedulers"]]
        merged["warnings"] += [f"{ns}: {w}" for w in one["warnings"]]
    merged["types"] = dict(sorted(merged["types"].items()))
    return merged


def warnings(status: dict[str, Any], now_ms: int) -> list[str]:
    """What would stall silently: overdue delayed tasks with no scheduler
    alive, or overdue by more than :data:`OVERDUE_WARN_S` while schedulers
    are alive (stuck or lagging), ready tasks of a type no live worker serves."""
    found: list[str] = []
    served = {
        t
        for w in status["workers"]
        if w["registered"] and w["lease_expires_ms"] > now_ms
        for t in w["types"]
    }
    if not status["schedulers"]:
        overdue = {n: t["overdue"] for n, t in status["types"].items() if t["overdue"]}
        if overdue:
            listed = ", ".join(f"{n} ({c})" for n, c in sorted(overdue.items()))
            found.append(
                f"delayed tasks are overdue and no scheduler is alive: {listed}; "
                "delayed tasks and retries only become ready when `taskscale scheduler` runs"
            )
    else:
        late = {
            n: t["oldest_overdue_s"]
            for n, t in status["types"].items()
            if t["oldest_overdue_s"] > OVERDUE_WARN_S
        }
        if late:
            listed = ", ".join(f"{n} (by {s:.0f} s)" for n, s in sorted(late.items()))
            alive = len(status["schedulers"])
            found.append(
                f"delayed tasks are overdue by more than {OVERDUE_WARN_S:g} s although "
                f"{alive} scheduler(s) are alive: {listed}; a scheduler may be stuck or "
                "unable to keep up (its log, its taskscale_scheduler_* metrics)"
            )
    for key, what in status.get("wrong_type_keys", {}).items():
        found.append(
            f"key {key} is a {what}: the scripts refuse it and write nothing (what it "
            "concerns is held back; workers and schedulers serve the rest); delete or "
            "rename it (docs/operating.md, 'A key of the wrong type')"
        )
    for name, t in sorted(status["types"].items()):
        if t["queued"] and name not in served:
            found.append(
                f"{name}: {t['queued']} task(s) ready and no live worker serves {name} "
                "(start one with --types including it, or `taskscale types forget` a mistake)"
            )
    return found


def limits_view(limits: TypeLimits | None) -> dict[str, Any] | None:
    """A type's flow-control limits for the status (None: no limits)."""
    if limits is None:
        return None
    return {
        "rate": limits.rate,
        "period_s": limits.period_s,
        "burst": limits.burst,
        "concurrency": limits.concurrency,
    }


def _limits_cell(limits: dict[str, Any] | None) -> str:
    """E.g. ``10/1s max 3``; ``-`` for an unlimited type."""
    if not limits:
        return "-"
    parts = []
    if limits["rate"] is not None:
        parts.append(f"{limits['rate']}/{limits['period_s']:g}s")
    if limits["concurrency"] is not None:
        parts.append(f"max {limits['concurrency']}")
    return " ".join(parts)


def worker_view(worker_id: str, lease_ms: float, record: dict[bytes, bytes]) -> dict[str, Any]:
    fields = {as_text(k): as_text(v) for k, v in record.items()}
    try:
        stats = json.loads(fields.get("stats", "{}"))
    except ValueError:
        stats = {}
    return {
        "id": worker_id,
        "pod": fields.get("pod", ""),
        "host": fields.get("host", ""),
        "pid": _int(fields.get("pid")),
        "types": [t for t in fields.get("types", "").split(",") if t],
        "threads": _int(fields.get("threads")),
        "busy": _int(fields.get("busy")),
        "started_ms": _int(fields.get("started_ms")),
        "heartbeat_ms": _int(fields.get("heartbeat_ms")),
        "lease_expires_ms": int(lease_ms),
        "stats": stats,
        "registered": bool(fields),
    }


def pods_of(workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worker records summed per pod (a pod may run several worker processes:
    ``--processes``), sorted by pod: ``{"pod", "processes", "busy", "threads"}``."""
    pods: dict[str, dict[str, Any]] = {}
    for w in workers:
        pod = pods.setdefault(w["pod"], {"pod": w["pod"], "processes": 0, "busy": 0, "threads": 0})
        pod["processes"] += 1
        pod["busy"] += w["busy"] or 0
        pod["threads"] += w["threads"] or 0
    return [pods[name] for name in sorted(pods)]


def ago(seconds: float | None) -> str:
    """A time since (:func:`durations.span`: ``4.2s``, ``3m30s``, ``2h00m``);
    ``never`` for None."""
    return "never" if seconds is None else span(seconds)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


#: The per-type counts of the text table, in column order.
_COUNTS = ("queued", "delayed", "active", "completed", "failed", "cancelled", "dead")


def render(status: dict[str, Any]) -> str:
    """The human-readable tables."""
    now = float(status["now"])
    type_rows = []
    for name, t in status["types"].items():
        idle = (
            "paused"
            if t.get("paused_since_ms") is not None
            else "busy"
            if t["active"]
            else ago(None if t["idle_since"] is None else now - t["idle_since"])
        )
        type_rows.append(
            [
                name,
                *(str(t[k]) for k in _COUNTS),
                idle,
                _limits_cell(t.get("limits")),
            ]
        )
    lines = _table(["TYPE", *(k.upper() for k in _COUNTS), "IDLE FOR", "LIMITS"], type_rows)
    if not type_rows:
        lines.append("(no task types yet)")
    lines.append("")
    worker_rows = [
        [
            w["id"],
            f"{w['pod']}/{w['host']}",
            ",".join(w["types"]),
            f"{w['busy']}/{w['threads']}",
            ago(now - w["heartbeat_ms"] / 1000) + " ago" if w["heartbeat_ms"] else "?",
        ]
        for w in sorted(status["workers"], key=lambda w: (w["pod"], w["id"]))
    ]
    lines += _table(["WORKER", "POD/HOST", "TYPES", "BUSY", "HEARTBEAT"], worker_rows)
    if not worker_rows:
        lines.append("(no live workers)")
    lines.append("")
    pods = pods_of(status["workers"])
    if any(p["processes"] > 1 for p in pods):  # taskscale worker --processes P
        pod_rows = [[p["pod"], str(p["processes"]), f"{p['busy']}/{p['threads']}"] for p in pods]
        lines += [*_table(["POD", "PROCESSES", "BUSY"], pod_rows), ""]
    periodic = status.get("schedules", [])
    if periodic:
        lines += [*render_schedules(periodic, now_s=now), ""]
    alive = status.get("schedulers", [])
    lines.append(f"schedulers alive: {len(alive)}")
    if status.get("open_fanouts"):
        lines.append(f"open streamed fan-outs: {status['open_fanouts']}")
    lines += [f"WARNING: {w}" for w in status.get("warnings", [])]
    return "\n".join(lines)
