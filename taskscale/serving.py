"""Is a task type served right now, and why has an RPC not been answered?

An RPC to a type no live worker serves is not an error the queue can see:
the task waits in its ready list, correctly, for a worker that may be one
scale-from-zero away. What the caller needs is to *know* that is what it
waits for, so :func:`taskscale.rpc.call` calls :func:`explain_no_reply` when
its timeout passes and puts the answer in :class:`~taskscale.rpc.TaskTimeout`
("no live worker serves 'report': the task is still queued ..."), and a
caller that would rather not wait at all asks :func:`live_workers_serving`
first (``CallOptions(require_worker=True)``).

Both are reads only: the workers zset (a live lease scores after the Redis
clock's now) and each live worker's registry record, which lists the types
it serves (docs/schema.md, "Worker registry"); the explanation adds one
bounded ``task_lookup`` of the task.
"""

from __future__ import annotations

import logging

import redis

from taskscale.admin import LookupLimitReached, task_info
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import server_time
from taskscale.text import as_text

log = logging.getLogger(__name__)

#: Most queued/delayed entries the explanation's task lookup examines.
EXPLAIN_LOOKUP_LIMIT = 50_000


def live_workers_serving(client: RedisClient, keys: Keys, task_type: str) -> list[str]:
    """Ids of the workers whose lease is live and that serve ``task_type``."""
    now_ms = server_time(client, keys).ms
    live = [as_text(w) for w in client.zrangebyscore(keys.workers, now_ms, "+inf")]
    if not live:
        return []
    pipe = client.pipeline(transaction=False)
    for worker_id in live:
        pipe.hget(keys.worker(worker_id), "types")
    served = pipe.execute()
    return [
        worker_id
        for worker_id, types in zip(live, served, strict=True)
        if types is not None and task_type in as_text(types).split(",")
    ]


def explain_no_reply(
    client: RedisClient, keys: Keys, *, task_id: str, task_type: str | None
) -> str:
    """Why task ``task_id`` has not answered, in a sentence ("" if Redis
    can't say: the caller's timeout must not turn into a Redis error)."""
    try:
        return _explain(client, keys, task_id, task_type)
    except (redis.RedisError, LookupLimitReached, ValueError) as exc:
        log.debug("no explanation for task %s: %s", task_id, exc)
        return ""


def _explain(client: RedisClient, keys: Keys, task_id: str, task_type: str | None) -> str:
    info = task_info(client, keys, task_id, task_type=task_type, limit=EXPLAIN_LOOKUP_LIMIT)
    if info is None:
        return "the task is nowhere taskscale keeps one (its reply was read or has expired)"
    if info.state == "running":
        return f"the task is still running, on worker {info.where}"
    if info.state == "done":
        return "the reply arrived just after the timeout: get() it again"
    kind = info.task_type
    if info.state == "delayed":
        return f"the task waits as a delayed retry; {_schedulers(client, keys)}"
    if info.state != "queued":
        return f"the task is {info.state}"
    workers = live_workers_serving(client, keys, kind)
    if not workers:
        return (
            f"no live worker serves {kind!r}: the task is still queued and runs when a worker "
            f"started with --types {kind} takes it (on Kubernetes: is {kind!r} in a "
            f"TaskScaler's taskTypes, and is its Deployment scaling up?); "
            f"`taskscale cancel {task_id}` drops it"
        )
    plural = "s" if len(workers) != 1 else ""
    return (
        f"the task is still queued: {len(workers)} live worker{plural} serve {kind!r} "
        "but none has taken it yet (busy with a backlog, or too few threads)"
    )


def _schedulers(client: RedisClient, keys: Keys) -> str:
    now_ms = server_time(client, keys).ms
    if client.zcount(keys.schedulers, now_ms, "+inf"):
        return "a scheduler is alive and promotes it when it is due"
    return "no scheduler is alive, so it never becomes ready: run `taskscale scheduler`"
