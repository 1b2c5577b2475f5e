"""The console's overview of one namespace in one ``console_overview.lua`` call.

``taskscale status`` (:func:`taskscale.status.collect`) reads a namespace in
pipelines of ~15 commands per type: with 1000 types the console's overview,
polled every 2 s by every open page, cost ~18 000 commands and most of a
second of Python per refresh.  This reads the same numbers in one read-only
script call on the Redis clock (as the controller's ``observe.lua`` does),
plus the periodic schedules' one read, and shapes them exactly as
``status.collect`` does -- the same fields, workers and warnings (built by
:func:`taskscale.status.worker_view` and :func:`taskscale.status.warnings`)
-- with what only the console shows added per type: ``due_soon``,
``oldest_ready_s`` (``lib/oldest_ready.lua``, the controller's rule),
``idle_for_s``, ``claimed``, ``wait_ms``, ``service_ms``, ``dead_lettered``;
and, asked for, every enqueued type's rates over the last full minute of
its history (what :func:`taskscale.dashboard.history_data.rates` reads, in
the same call: one call per namespace per refresh).  Those full buckets never
change once past, so the rates are kept per client and namespace for as long
as the last full bucket is the same (10 s): the script then skips the
history (the page polls every 2 s: four refreshes in five read none of it).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from taskscale import history, status
from taskscale.keys import PRIORITY_LEVELS, Keys
from taskscale.limits import parse_limits
from taskscale.luascripts import bound_script
from taskscale.pausing import parse_paused
from taskscale.redis_urls import RedisClient
from taskscale.scheduling.schedules import list_schedules
from taskscale.server_clock import ServerTime
from taskscale.text import as_text

#: "Due soon" on the overview: delayed tasks due within this many ms.
DUE_SOON_MS = 60_000
#: The stats counters read per type (the script's ARGV[4..]), in its row order
#: (``_type_row`` unpacks them in this order: change both together).
STATS = ("completed", "failed", "cancelled", "claimed", "wait_ms", "service_ms", "dead")
#: The numbers before the stats in one type's row of the script's reply.
_FIXED = ("delayed", "dead", "overdue", "earliest_ms", "due_soon", "oldest_ms")
#: Full history buckets the rates read: the last minute (the current, partial
#: bucket left out).
RATE_BUCKETS = 6
_RATES = RATE_BUCKETS + 2  # completed per bucket, failed and dead summed
_ROW = PRIORITY_LEVELS + len(_FIXED) + len(STATS) + _RATES

#: Per client, per key prefix: (last full history bucket, the rates of every
#: enqueued type over the minute that ends with it).
_held: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, dict[str, Any]]]] = (
    weakref.WeakKeyDictionary()
)
_held_lock = threading.Lock()


def read_overview(client: RedisClient, keys: Keys, *, rates: bool = False) -> dict[str, Any]:
    """One namespace's overview: ``status.collect``'s view, each type's row
    with the console's additions and without ``stats``; with ``rates``, also
    ``"rates"``: per type of ``types``, completed, failed and dead per second
    over the last full minute of history and completed/s of each of its six
    buckets (the ``history_data.rates`` rows)."""
    script = bound_script(client, "console_overview")
    script_keys = [
        keys.types,
        keys.active,
        keys.idle_since,
        keys.workers,
        keys.limits,
        keys.schedulers,
        keys.fanouts_open,
        keys.paused,
    ]
    held = _held_rates(client, keys.prefix) if rates else None
    args: list[str | int] = [keys.prefix, status.OVERDUE_GRACE_MS, DUE_SOON_MS]
    args += [history.BUCKET_S, RATE_BUCKETS if rates else 0, held[0] if held else -1, *STATS]
    reply = script(keys=script_keys, args=args, client=client)  # may raise: data.py
    clock, names, rows, active, idle, limits, workers, schedulers, open_fanouts, paused = reply[:10]
    enqueued, rated = int(reply[10]), bool(int(reply[11]))
    row_len = _ROW if rated else _ROW - RATE_BUCKETS
    now = ServerTime.from_reply(*clock)
    active_by = {as_text(k): int(v) for k, v in _pairs(active)}
    idle_by = {as_text(k): float(v) for k, v in _pairs(idle)}
    limits_by = parse_limits(dict(_pairs(limits)))
    paused_by = parse_paused(dict(_pairs(paused)))
    types = {}
    rate_rows = {}
    for i, raw in enumerate(names):
        name = as_text(raw)
        row = rows[i * row_len : (i + 1) * row_len]
        types[name] = _type_row(row, now, active_by.get(name, 0), idle_by.get(name))
        types[name]["limits"] = status.limits_view(limits_by.get(name))
        types[name]["paused_since_ms"] = paused_by.get(name)
        if rated and i < enqueued:
            rate_rows[name] = _rates(row[_ROW - _RATES :])
    found: dict[str, Any] = {
        "now": now.unix_s,
        "types": dict(sorted(types.items())),
        "workers": [
            status.worker_view(
                as_text(workers[i]), float(workers[i + 1]), dict(_pairs(workers[i + 2]))
            )
            for i in range(0, len(workers), 3)
        ],
        "schedulers": sorted(as_text(s) for s in schedulers),
        "schedules": [s.as_dict() for s in list_schedules(client, keys)],
        "open_fanouts": int(open_fanouts),
        "wrong_type_keys": {},
    }
    found["warnings"] = status.warnings(found, now.ms)
    if rated:
        found["rates"] = dict(sorted(rate_rows.items()))
        _hold_rates(client, keys.prefix, history.current_bucket(now.ms) - 1, found["rates"])
    elif held is not None:  # the same minute: the types enqueued now, from what is held
        now_enqueued = sorted(as_text(n) for n in names[:enqueued])
        found["rates"] = {n: held[1].get(n, _NO_RATES) for n in now_enqueued}
    return found


#: The rates of a type with no history in the minute.
_NO_RATES: dict[str, Any] = {
    "completed_per_s": 0.0,
    "failed_per_s": 0.0,
    "dead_per_s": 0.0,
    "done_per_s": [0.0] * RATE_BUCKETS,
}


def _held_rates(client: RedisClient, prefix: str) -> tuple[int, dict[str, Any]] | None:
    with _held_lock:
        return _held.get(client, {}).get(prefix)


def _hold_rates(client: RedisClient, prefix: str, bucket: int, rates: dict[str, Any]) -> None:
    with _held_lock:
        _held.setdefault(client, {})[prefix] = (bucket, rates)


def _rates(row: list[int]) -> dict[str, Any]:
    done, failed, dead = row[:RATE_BUCKETS], row[RATE_BUCKETS], row[RATE_BUCKETS + 1]
    span = RATE_BUCKETS * history.BUCKET_S
    return {
        "completed_per_s": sum(done) / span,
        "failed_per_s": failed / span,
        "dead_per_s": dead / span,
        "done_per_s": [c / history.BUCKET_S for c in done],
    }


def _pairs(flat: list[Any]) -> list[tuple[Any, Any]]:
    """An HGETALL reply of a script (a flat list) as (field, value) pairs."""
    return list(zip(flat[::2], flat[1::2], strict=True))


def _type_row(row: list[int], now: ServerTime, active: int, idle: float | None) -> dict[str, Any]:
    # plain indexing: this runs once per type on every refresh (1000 types: ~1000 rows)
    p = PRIORITY_LEVELS
    delayed, dead, overdue, earliest, due_soon, oldest = row[p : p + len(_FIXED)]
    completed, failed, cancelled, claimed, wait_ms, service_ms, dead_lettered = row[
        p + len(_FIXED) : p + len(_FIXED) + len(STATS)
    ]
    queued = row[:p]
    return {
        "queued": sum(queued),
        "queued_by_priority": queued,
        "delayed": delayed,
        "active": active,
        "completed": completed,
        "failed": failed,
        "cancelled": cancelled,
        "dead": dead,
        "overdue": overdue,
        "oldest_overdue_s": max(0.0, (now.ms - earliest) / 1000) if earliest >= 0 else 0.0,
        "idle_since": idle,
        "claimed": claimed,
        "wait_ms": wait_ms,
        "service_ms": service_ms,
        "dead_lettered": dead_lettered,
        "due_soon": due_soon,
        "oldest_ready_s": oldest / 1000 if oldest >= 0 else None,
        "idle_for_s": None if active or idle is None else max(0.0, now.unix_s - idle),
    }
