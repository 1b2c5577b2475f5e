"""Every namespace the console shows, merged, and the one that holds a type.

A sharded deployment lists several key namespaces (``--namespace a,b,c``;
docs/redis.md, "Sharding"), and each task type lives in exactly one of them
(:class:`~taskscale.shards.ShardMap`: CRC-32 of its name).  The console reads
every namespace and merges what it finds the way ``taskscale status
--namespace a,b,c`` does (:func:`taskscale.status.merge_namespaces`: workers
and schedulers get a ``namespace``, warnings are prefixed with it), and
sends each action -- retry, delete, run now, enqueue, call -- to the
namespace of the type it names.  With one namespace every reader here returns
exactly what the single-namespace reader returns.
"""

from __future__ import annotations

from typing import Any

from taskscale import admin, status
from taskscale.catalog import read_catalog
from taskscale.dashboard import data
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.scaling import read_scalers
from taskscale.shards import ShardMap

#: Overview numbers added up should a type turn up in several namespaces:
#: the status's, and what the overview adds to its rows.
_SUMMED = (*status.SUMMED, "due_soon", "claimed", "wait_ms", "service_ms", "dead_lettered")


def every(shards: ShardMap) -> list[Keys]:
    return [Keys(ns) for ns in shards.namespaces]


def status_of(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """``taskscale status --json`` for the listed namespaces."""
    return status.collect_namespaces(client, shards.namespaces)


def overview(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """:func:`data.overview` of every namespace, merged."""
    if not shards.sharded:
        return data.overview(client, Keys(shards.namespaces[0]))
    parts = [(k.namespace, data.overview(client, k)) for k in every(shards)]
    return status.merge_namespaces(parts, summed=_SUMMED)


def catalog(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """:func:`read_catalog` of every namespace, merged: a type's live workers
    from all of them, ``unserved`` when enqueued and served nowhere."""
    if not shards.sharded:
        return read_catalog(client, Keys(shards.namespaces[0]))
    types: dict[str, dict[str, Any]] = {}
    now = 0.0
    for keys in every(shards):
        found = read_catalog(client, keys)
        now = max(now, found["now"])
        for name, entry in found["types"].items():
            have = types.get(name)
            if have is None:
                types[name] = {**entry, "namespace": keys.namespace}
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
    if not shards.sharded:
        return read_scalers(client, Keys(shards.namespaces[0]))
    found = [s for k in every(shards) for s in read_scalers(client, k)]
    return sorted(found, key=lambda s: str(s["scaler"]))


def fanouts(client: RedisClient, shards: ShardMap) -> list[dict[str, Any]]:
    """The fan-outs of every namespace (each with its ``namespace`` when sharded)."""
    if not shards.sharded:
        return data.fanouts(client, Keys(shards.namespaces[0]))
    found = [
        {**f, "namespace": k.namespace} for k in every(shards) for f in data.fanouts(client, k)
    ]
    return sorted(found, key=lambda f: (f["done"], f["id"]))


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
    """:func:`data.type_detail` in the type's namespace; its scalers from every one."""
    keys = shards.keys_for(task_type)
    sized_by = scalers(client, shards) if shards.sharded else None
    detail = data.type_detail(client, keys, task_type, scalers=sized_by)
    if shards.sharded:
        detail["namespace"] = keys.namespace
    return detail


def find_task(client: RedisClient, shards: ShardMap, task_id: str, *, limit: int) -> Any:
    """:func:`admin.task_info` in each namespace until one knows the task.

    Raises :class:`admin.LookupLimitReached` when no namespace knew it and
    one of them stopped at ``limit`` entries (the answer is then unknown)."""
    limited: admin.LookupLimitReached | None = None
    for keys in every(shards):
        try:
            info = admin.task_info(client, keys, task_id, limit=limit)
        except admin.LookupLimitReached as exc:
            limited = exc
            continue
        if info is not None:
            return info
    if limited is not None:
        raise limited
    return None
