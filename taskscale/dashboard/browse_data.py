"""The console's task browsing: queued tasks of a type and priority (paged),
the tasks running now (from each live worker's in-flight hash and its
registry record), and a search of the arguments over a bounded scan."""

from __future__ import annotations

import json
from typing import Any

from taskscale import envelope
from taskscale.keys import PRIORITY_LEVELS, Keys, check_name
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import server_time
from taskscale.shards import ShardMap
from taskscale.text import as_text, loads_lenient

#: The most queued/delayed entries one search reads (docs/dashboard.md).
SEARCH_CAP = 10_000
#: The most matches a search returns.
SEARCH_MATCHES = 100
#: Entries read per LRANGE / ZRANGE while searching.
_CHUNK = 500


def _task(raw: object, *, stamped: bool = False) -> dict[str, Any]:
    """One envelope as a listing shows it (``stamped``: with its enqueue time,
    read through the runtime's decoder; an undecodable one shows none)."""
    text = as_text(raw, errors="surrogateescape")
    doc = loads_lenient(text)
    doc = doc if isinstance(doc, dict) else {}
    args = {"args": doc.get("args", []), "kwargs": doc.get("kwargs", {})}
    when = None
    if stamped:
        try:
            when = envelope.decode(text).enqueued_ms
        except (envelope.EnvelopeError, UnicodeError):
            when = None
    return {
        "id": str(doc.get("id", "")),
        "type": str(doc.get("type", "")),
        "arguments": json.dumps(args, ensure_ascii=False, separators=(", ", ": "))[:500],
        "enqueued_at_ms": when,
        "attempts": doc.get("attempts", 0),
        "raw": text,
    }


def queued(
    client: RedisClient, shards: ShardMap, task_type: str, priority: int, *, start: int, count: int
) -> dict[str, Any]:
    """Page ``start..start+count`` of ``task_type``'s ready list at ``priority``
    (next to claim first), and how many wait at each priority."""
    check_name("task type", task_type)
    keys = shards.keys_for(task_type)
    pipe = client.pipeline(transaction=False)
    for level in range(PRIORITY_LEVELS):
        pipe.llen(keys.queue(task_type, level))
    pipe.lrange(keys.queue(task_type, priority), start, start + count - 1)
    *lengths, page = pipe.execute()
    tasks = [_task(raw, stamped=True) for raw in page]
    for t in tasks:
        del t["raw"]
    return {
        "type": task_type,
        "priority": priority,
        "by_priority": [int(n) for n in lengths],
        "total": int(lengths[priority]),
        "start": start,
        "count": count,
        "tasks": tasks,
    }


def recent(client: RedisClient, shards: ShardMap, task_type: str) -> dict[str, Any]:
    """``task_type``'s most recently finished runs, newest first, as the
    workers keep them in ``recent:T`` (``--recent-cap``)."""
    check_name("task type", task_type)
    keys = shards.keys_for(task_type)
    runs = []
    for raw in client.lrange(keys.recent(task_type), 0, 9_999):
        doc = loads_lenient(raw)
        if isinstance(doc, dict):
            runs.append(doc)
    return {"type": task_type, "runs": runs}


def running(client: RedisClient, shards: ShardMap) -> dict[str, Any]:
    """Every task in a live worker's in-flight hash: type, id, worker, pod,
    claimed (from the worker's record, as of its last heartbeat), arguments."""
    out: list[dict[str, Any]] = []
    now_ms = 0
    for namespace in shards.namespaces:
        keys = Keys(namespace)
        now_ms = server_time(client, keys).ms
        workers = [as_text(w) for w in client.zrangebyscore(keys.workers, now_ms, "+inf")]
        pipe = client.pipeline(transaction=False)
        for w in workers:
            pipe.hgetall(keys.inflight(w))
            pipe.hmget(keys.worker(w), "pod", "running")
        replies = pipe.execute()
        for i, w in enumerate(workers):
            inflight, (pod, held) = replies[2 * i], replies[2 * i + 1]
            since = loads_lenient(held) if held else {}
            since = since if isinstance(since, dict) else {}
            for task_id, raw in inflight.items():
                task = _task(raw)
                del task["raw"]
                tid = as_text(task_id)
                started = since.get(tid)
                task.update(
                    id=tid,
                    worker=w,
                    pod=as_text(pod) if pod else "",
                    started_ms=started if isinstance(started, int) and started > 0 else None,
                )
                task["elapsed_s"] = (
                    (now_ms - task["started_ms"]) / 1000 if task["started_ms"] else None
                )
                out.append(task)
    out.sort(key=lambda t: (t["type"], t["started_ms"] or 0))
    return {"now_ms": now_ms, "tasks": out}


def search(
    client: RedisClient, shards: ShardMap, text: str, *, task_type: str | None = None
) -> dict[str, Any]:
    """Queued and delayed tasks whose envelope contains ``text`` (a substring
    of the arguments as JSON), reading at most :data:`SEARCH_CAP` entries."""
    if not text:
        raise ValueError("search text is empty")
    if len(text) > 200:
        raise ValueError("search text is over 200 characters")
    examined = 0
    matches: list[dict[str, Any]] = []
    spaces = [shards.keys_for(task_type)] if task_type else [Keys(n) for n in shards.namespaces]
    for keys in spaces:
        types = (
            [task_type] if task_type else sorted(as_text(t) for t in client.smembers(keys.types))
        )
        lists = [(keys.queue(t, p), "queued") for t in types for p in range(PRIORITY_LEVELS)]
        lists += [(keys.delayed(t), "delayed") for t in types]
        for key, state in lists:
            at = 0
            while examined < SEARCH_CAP and len(matches) < SEARCH_MATCHES:
                want = min(_CHUNK, SEARCH_CAP - examined)
                chunk: list[Any] = list(
                    client.lrange(key, at, at + want - 1)
                    if state == "queued"
                    else client.zrange(key, at, at + want - 1)
                )
                examined += len(chunk)
                for raw in chunk:
                    task = _task(raw)
                    if text in task["arguments"] or text in task["raw"]:
                        del task["raw"]
                        task["state"] = state
                        matches.append(task)
                if len(chunk) < want:
                    break
                at += want
    return {
        "text": text,
        "examined": examined,
        "cap": SEARCH_CAP,
        "capped": examined >= SEARCH_CAP,
        "matches": matches[:SEARCH_MATCHES],
    }
