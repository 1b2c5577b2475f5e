"""What the console shows, each reader written once for the namespaces it reads.

Every reader takes the deployment's :class:`~taskscale.shards.ShardMap` --
one namespace, or a sharded deployment's list (``--namespace a,b,c``;
docs/redis.md, "Sharding") -- and returns one view.  Reads that cover the
deployment (overview, catalog, scalers, fan-outs) read each namespace and,
when there are several, merge what they found
(:func:`taskscale.status.read_namespaces`, as ``taskscale status`` does: the
overview as ``taskscale status --namespace a,b,c`` does,
:func:`taskscale.status.merge_namespaces`: workers and schedulers get a
``namespace``, warnings are prefixed with it); with one namespace the answer
is exactly that namespace's.  Reads of one type (its detail, dead letters,
delayed tasks) go to the namespace that holds it (CRC-32 of its name).

The overview is one read-only script call per namespace
(``console_overview.lua``, :mod:`taskscale.dashboard.overview_script`): the
view of :func:`taskscale.status.collect` plus what only the console shows --
the delayed tasks due within the next minute, and the age of the oldest
ready task per type by ``lib/oldest_ready.lua``, the rule the controller's
``observe.lua`` uses, so the console and the controller never disagree on
it.  Rates and sparklines are the browser's job: it polls the counters and
keeps the differences, so the server holds no history.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import redis

from taskscale import admin, status
from taskscale.catalog import read_catalog
from taskscale.dashboard import history_data
from taskscale.dashboard.overview_script import read_overview
from taskscale.keys import PRIORITY_LEVELS, Keys
from taskscale.redis_urls import RedisClient
from taskscale.scaling import read_scalers
from taskscale.shards import ShardMap
from taskscale.text import as_text
from taskscale.workflows import state as workflow_state

#: Most keys one fan-out listing SCANs through (fan-outs have no index).
FANOUT_SCAN_LIMIT = 100_000
#: Overview numbers added up should a type turn up in several namespaces:
#: the status's, and what the overview adds to its rows.
SUMMED = (*status.SUMMED, "due_soon", "claimed", "wait_ms", "service_ms", "dead_lettered")


def status_of(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """``taskscale status --json`` for the listed namespaces."""
    return status.collect_namespaces(client, shards.namespaces)


# --- the overview -----------------------------------------------------------------------


def overview(client: RedisClient, shards: ShardMap, *, rates: bool = False) -> dict[str, Any]:
    """``status.collect`` with ``oldest_ready_s``, ``due_soon``, ``idle_for_s``,
    ``wait_ms``/``claimed`` and ``dead_lettered`` (the stats counter: every
    task ever dead-lettered, which the browser turns into a rate) per type;
    with ``rates``, ``"rates"`` as :func:`history_data.rates` reads them."""
    return status.read_namespaces(
        shards.namespaces, partial(_overview_of, client, rates=rates), _merge_overviews
    )


def _merge_overviews(parts: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    merged = status.merge_namespaces(parts, summed=SUMMED)
    if "rates" in parts[0][1]:
        merged["rates"] = {}
        for _, one in parts:  # a type in several namespaces: the last one's, as history_data
            merged["rates"].update(one["rates"])
        merged["rates"] = dict(sorted(merged["rates"].items()))
    return merged


def _overview_of(client: RedisClient, keys: Keys, *, rates: bool = False) -> dict[str, Any]:
    """One namespace's overview in one script call; when a key of the wrong
    type stops the script (issue 21), what ``taskscale status`` shows -- every
    type, and a warning naming the key -- with the console's fields neutral."""
    try:
        return read_overview(client, keys, rates=rates)
    except redis.ResponseError:
        found = status.collect(client, keys)
        for name, row in found["types"].items():
            row.pop("stats", None)
            found["types"][name] = {**empty_row(), **row}
        if rates:
            found["rates"] = history_data.rates(client, ShardMap((keys.namespace,)))
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


# --- catalog, scalers, workers, one type ------------------------------------------------


def catalog(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """:func:`read_catalog` of every namespace, merged: a type's live workers
    from all of them, ``unserved`` when enqueued and served nowhere."""
    return status.read_namespaces(shards.namespaces, partial(read_catalog, client), _merge_catalogs)


def _merge_catalogs(parts: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    types: dict[str, dict[str, Any]] = {}
    now = 0.0
    for namespace, found in parts:
        now = max(now, found["now"])
        for name, entry in found["types"].items():
            have = types.get(name)
            if have is None:
                types[name] = {**entry, "namespace": namespace}
                continue
            if entry.get("registered") and not have.get("registered"):
                have.update({k: v for k, v in entry.items() if k != "workers"})
            have["workers"] = have["workers"] + entry["workers"]
            have["served"] = have["served"] or entry["served"]
            have["enqueued"] = have["enqueued"] or entry["enqueued"]
            have["variants"] = max(have["variants"], entry["variants"])
    ordered = dict(sorted(types.items()))
    unserved = [n for n, t in ordered.items() if t["enqueued"] and not t["served"]]
    return {"now": now, "types": ordered, "unserved": unserved}


def scalers(client: RedisClient, shards: ShardMap) -> list[dict[str, Any]]:
    """Every scaler that recorded its passes in any of the namespaces."""
    return status.read_namespaces(shards.namespaces, partial(read_scalers, client), _merge_scalers)


def _merge_scalers(parts: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    return sorted((s for _, found in parts for s in found), key=lambda s: str(s["scaler"]))


def workers(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """The live workers of every namespace, a pod's processes together, each
    with ``dead_unreaped``: its lease expired (or its record is gone) and no
    scheduler has reaped it yet."""
    found = status_of(client, shards)
    now_ms = found["now"] * 1000
    listed = sorted(found["workers"], key=lambda w: (w["pod"], w["id"]))
    for w in listed:
        w["dead_unreaped"] = not w["registered"] or w["lease_expires_ms"] < now_ms
    return {"now": found["now"], "workers": listed, "pods": status.pods_of(listed)}


def type_detail(client: RedisClient, shards: ShardMap, task_type: str) -> dict[str, Any]:
    """One type: its overview row (with its limits), catalog entry, live
    workers and periodic schedules, read in the namespace that holds it, and
    the scalers that size it (from every one)."""
    keys = shards.keys_for(task_type)
    found = _overview_of(client, keys)
    entry = read_catalog(client, keys)["types"].get(task_type)
    detail = {
        "type": task_type,
        "now": found["now"],
        "state": found["types"].get(task_type),
        "catalog": entry,
        "workers": [w for w in found["workers"] if task_type in w["types"]],
        "schedules": [sc for sc in found["schedules"] if sc["type"] == task_type],
        "scalers": [s for s in scalers(client, shards) if task_type in s.get("types", [])],
    }
    if shards.sharded:
        detail["namespace"] = keys.namespace
    return detail


def find_task(client: RedisClient, shards: ShardMap, task_id: str, *, limit: int) -> Any:
    """:func:`admin.task_info` in each namespace until one knows the task.

    Raises :class:`admin.LookupLimitReached` when no namespace knew it and
    one of them stopped at ``limit`` entries (the answer is then unknown)."""
    limited: admin.LookupLimitReached | None = None
    for ns in shards.namespaces:
        try:
            info = admin.task_info(client, Keys(ns), task_id, limit=limit)
        except admin.LookupLimitReached as exc:
            limited = exc
            continue
        if info is not None:
            return info
    if limited is not None:
        raise limited
    return None


# --- listings ---------------------------------------------------------------------------


def dead_letters(
    client: RedisClient, shards: ShardMap, task_type: str, *, start: int = 0, count: int = 50
) -> dict[str, Any]:
    """The dead letters of ``task_type``, oldest first: ``count`` from ``start``
    (in the namespace that holds it), and how many there are."""
    keys = shards.keys_for(task_type)
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
                "retries": d.fields.get("attempts", 0),  # the envelope counts retries taken
            }
            for d in letters
        ],
    }


def delayed_tasks(
    client: RedisClient, shards: ShardMap, task_type: str, *, start: int = 0, count: int = 50
) -> dict[str, Any]:
    """The delayed tasks of ``task_type``, soonest first: ``count`` from
    ``start`` (in the namespace that holds it), and how many there are."""
    keys = shards.keys_for(task_type)
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
                "retries": d.fields.get("attempts", 0),  # the envelope counts retries taken
            }
            for d in tasks
        ],
    }


def fanouts(client: RedisClient, shards: ShardMap, *, limit: int = 200) -> list[dict[str, Any]]:
    """Fan-outs whose state hash still exists (in progress, or done and not
    yet expired), found by SCAN -- at most ``limit`` of them and
    :data:`FANOUT_SCAN_LIMIT` keys examined per namespace -- each with its
    ``namespace`` when there are several."""
    return status.read_namespaces(
        shards.namespaces, partial(_fanouts_in, client, limit=limit), _merge_fanouts
    )


def _merge_fanouts(parts: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    found = [{**f, "namespace": ns} for ns, listed in parts for f in listed]
    return sorted(found, key=lambda f: (f["done"], f["id"]))


def _fanouts_in(client: RedisClient, keys: Keys, *, limit: int) -> list[dict[str, Any]]:
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


# --- workflows --------------------------------------------------------------------------


def workflows(client: RedisClient, shards: ShardMap, *, limit: int = 200) -> list[dict[str, Any]]:
    """The running workflows (``{ns}:workflows``), newest first, at most
    ``limit`` per namespace, each with its counts and ``namespace``."""
    return status.read_namespaces(
        shards.namespaces, partial(_workflows_in, client, limit=limit), _merge_workflows
    )


def _merge_workflows(parts: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    found = [{**w, "namespace": ns} for ns, listed in parts for w in listed]
    return sorted(found, key=lambda w: -w["created_ms"])


def _workflows_in(client: RedisClient, keys: Keys, *, limit: int) -> list[dict[str, Any]]:
    ids = [as_text(w) for w in client.zrevrange(keys.workflows, 0, limit - 1)]
    pipe = client.pipeline(transaction=False)
    for w in ids:
        pipe.hmget(keys.workflow(w), "name", "state", "total", "finished", "failed", "created_ms")
    out = []
    for w, raw in zip(ids, pipe.execute() if ids else [], strict=True):
        name, state, total, finished, failed, created = (as_text(v or b"") for v in raw)
        if state:  # (a workflow whose keys expired meanwhile is left out)
            counts = {"total": total, "finished": finished, "failed": failed, "created_ms": created}
            out.append({"id": w, "name": name, **{k: int(v or 0) for k, v in counts.items()}})
    return out


def workflow(client: RedisClient, shards: ShardMap, workflow_id: str) -> dict[str, Any] | None:
    """One workflow with its steps (state, timing, result or error), from the
    first namespace that holds it; None when none does."""
    for namespace in shards.namespaces:
        found = workflow_state.read(workflow_id, client=client, keys=Keys(namespace))
        if found is not None:
            return {**found.as_dict(), "namespace": namespace}
    return None
