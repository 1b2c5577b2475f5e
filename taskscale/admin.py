"""Admin operations: dead letters, delayed tasks, queues, task lookup, types.

What an operator (the ``taskscale dead|queue|task|types`` commands, the
dashboard) does to a live deployment.  Every change is one Lua script in
``taskscale/scripts/admin_*.lua`` so it is atomic with any number of workers,
schedulers and operators acting at once, and keeps the counters right
(docs/schema.md, "Admin scripts"): a dead letter is requeued or purged
exactly once, ACTIVE_TASKS is never touched (nothing here is running), and
every removal is counted in the type's stats hash.  Listing is plain reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script as _script
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text, loads_lenient, shown

#: Most tasks one admin_purge.lua call deletes (bounds how long Redis is busy).
PURGE_BATCH = 1000
#: Most queue / delayed / dead entries one task lookup examines.
LOOKUP_LIMIT = 200_000


def _envelope_doc(raw: object) -> dict[str, Any]:
    """The JSON object in ``raw`` as it is (undecodable bytes kept as
    surrogate escapes; :func:`~taskscale.text.shown` before showing), {} if none."""
    doc = loads_lenient(raw)
    return doc if isinstance(doc, dict) else {}


@dataclass(frozen=True)
class DeadLetter:
    """One record of ``dead:T``; ``task_id`` is "" when the envelope doesn't decode."""

    task_id: str
    task_type: str
    envelope: str
    error: str
    failed_ms: int
    #: The last frames of the task's exception ("" when none was kept).
    traceback: str
    #: Decoded envelope fields (args, kwargs, attempts...); {} if undecodable.
    fields: dict[str, Any]


@dataclass(frozen=True)
class DelayedTask:
    task_id: str
    task_type: str
    due_ms: int
    envelope: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class TaskInfo:
    """Where a task is now.

    ``state`` is ``queued`` (``where`` = priority level), ``delayed``
    (``due_ms``), ``running`` (``where`` = worker id), ``dead`` (``error``,
    ``traceback``), ``done`` (an RPC task whose reply is still kept:
    ``ok`` and ``result`` or ``error``) or ``cancelled`` (by
    :func:`taskscale.cancel` in the last 24 h: ``where`` = "before it ran"
    or "while running", the latter a flag its function may have ignored).
    """

    task_id: str
    state: str
    task_type: str
    where: str = ""
    due_ms: int | None = None
    envelope: str = ""
    error: str = ""
    traceback: str = ""
    ok: bool | None = None
    result: Any = None


def _dead_letter(task_type: str, raw: Any) -> DeadLetter:
    """One dead letter as a reader shows it: never fails, whatever bytes it holds."""
    text = as_text(raw, errors="surrogateescape")
    rec = _envelope_doc(text)
    env = rec["envelope"] if isinstance(rec.get("envelope"), str) else text
    fields = _envelope_doc(env)
    task_id = fields.get("id") if isinstance(fields.get("id"), str) else ""
    failed_ms = rec.get("failed_ms")
    return DeadLetter(
        task_id=shown(str(task_id)),
        task_type=task_type,
        envelope=shown(env),
        error=shown(str(rec.get("error", ""))),
        failed_ms=int(failed_ms) if isinstance(failed_ms, int) else 0,
        traceback=shown(str(rec.get("traceback", ""))),
        fields=shown(fields),
    )


def dead_list(
    client: RedisClient, keys: Keys, task_type: str, *, start: int = 0, count: int = 50
) -> list[DeadLetter]:
    """Dead letters of ``task_type``, oldest first, ``count`` from ``start``."""
    check_name("task type", task_type)
    if count <= 0:
        return []
    raw = client.lrange(keys.dead(task_type), start, start + count - 1)
    return [_dead_letter(task_type, r) for r in raw]


def _ids(ids: Sequence[str] | None) -> list[str]:
    if ids is None:
        return []
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of task ids, not one string")
    if not ids:
        raise ValueError("an empty list of ids selects nothing; pass None for all")
    return [check_name("task id", i) for i in ids]


def _dead_op(
    client: RedisClient, keys: Keys, task_type: str, mode: str, ids: Sequence[str] | None
) -> int:
    check_name("task type", task_type)
    args = [keys.prefix, task_type, mode, *_ids(ids)]
    return int(_script(client, "admin_dead")(keys=[keys.types], args=args, client=client))


def dead_requeue(
    client: RedisClient, keys: Keys, task_type: str, *, ids: Sequence[str] | None = None
) -> int:
    """Move dead letters (all, or those with these task ids) back to the tail
    of their ready list with attempts reset; return how many moved."""
    return _dead_op(client, keys, task_type, "requeue", ids)


def dead_purge(
    client: RedisClient, keys: Keys, task_type: str, *, ids: Sequence[str] | None = None
) -> int:
    """Delete dead letters (all, or those with these task ids); return how many."""
    return _dead_op(client, keys, task_type, "purge", ids)


def delayed_list(
    client: RedisClient, keys: Keys, task_type: str, *, start: int = 0, count: int = 50
) -> list[DelayedTask]:
    """Delayed tasks of ``task_type``, soonest due first."""
    check_name("task type", task_type)
    if count <= 0:
        return []
    raw: list[tuple[bytes, float]] = client.zrange(  # type: ignore[assignment]
        keys.delayed(task_type), start, start + count - 1, withscores=True
    )
    out = []
    for member, score in raw:
        env = as_text(member, errors="surrogateescape")
        fields = _envelope_doc(env)
        task_id = fields.get("id") if isinstance(fields.get("id"), str) else ""
        out.append(
            DelayedTask(shown(str(task_id)), task_type, int(score), shown(env), shown(fields))
        )
    return out


def _delayed_op(client: RedisClient, keys: Keys, task_type: str, mode: str, task_id: str) -> bool:
    check_name("task type", task_type)
    check_name("task id", task_id)
    args = [keys.prefix, task_type, mode, task_id]
    return bool(_script(client, "admin_delayed")(keys=[keys.types], args=args, client=client))


def delayed_run_now(client: RedisClient, keys: Keys, task_type: str, task_id: str) -> bool:
    """Make a delayed task ready now; False if it is not in the delayed set."""
    return _delayed_op(client, keys, task_type, "run_now", task_id)


def delayed_delete(client: RedisClient, keys: Keys, task_type: str, task_id: str) -> bool:
    """Delete a delayed task; False if it is not in the delayed set."""
    return _delayed_op(client, keys, task_type, "delete", task_id)


def queue_purge(
    client: RedisClient, keys: Keys, task_type: str, *, include_delayed: bool = False
) -> int:
    """Delete every ready task of ``task_type`` (and its delayed tasks with
    ``include_delayed``); return how many.  Runs in atomic batches of
    :data:`PURGE_BATCH`, so tasks enqueued during a long purge may go too."""
    check_name("task type", task_type)
    script = _script(client, "admin_purge")
    mode = "delayed" if include_delayed else "ready"
    total = 0
    while True:
        n = int(
            script(
                keys=[keys.types], args=[keys.prefix, task_type, PURGE_BATCH, mode], client=client
            )
        )
        total += n
        if n == 0:  # not `< PURGE_BATCH`: a purged fan-out sub-task releases the next
            return total


@dataclass(frozen=True)
class ForgetResult:
    forgotten: bool
    queued: int
    delayed: int
    running: int


def forget_type_checked(
    client: RedisClient, keys: Keys, task_type: str, *, force: bool = False
) -> ForgetResult:
    """:func:`forget_type` with the counts found (why it was refused)."""
    check_name("task type", task_type)
    if force and not int(client.hget(keys.active, task_type) or 0):
        queue_purge(client, keys, task_type, include_delayed=True)
    reply = _script(client, "admin_forget")(
        keys=[keys.types, keys.active, keys.idle_since],
        args=[keys.prefix, task_type, "force" if force else ""],
        client=client,
    )
    done, queued, delayed, running = (int(x) for x in reply)
    return ForgetResult(bool(done), queued, delayed, running)


def forget_type(client: RedisClient, keys: Keys, task_type: str, *, force: bool = False) -> bool:
    """Forget ``task_type`` (types set, stats, idle clock, wake list, dead
    letters).  Refused (False) while it has ready or delayed tasks -- unless
    ``force``, which deletes them -- and always while a task of it runs."""
    return forget_type_checked(client, keys, task_type, force=force).forgotten


def task_info(
    client: RedisClient,
    keys: Keys,
    task_id: str,
    *,
    task_type: str | None = None,
    limit: int = LOOKUP_LIMIT,
) -> TaskInfo | None:
    """Where task ``task_id`` is now, or None if it is nowhere taskscale
    keeps it (finished without an RPC reply, a reply already read or
    expired, or never enqueued).  ``task_type`` narrows the scan.

    Raises :class:`LookupLimitReached` when the scan examined ``limit``
    entries without finding it (the answer is then unknown).
    """
    check_name("task id", task_id)
    if task_type is not None:
        check_name("task type", task_type)
    reply = _script(client, "task_lookup")(
        keys=[keys.types, keys.workers],
        args=[keys.prefix, task_id, task_type or "", limit],
        client=client,
    )
    state, ttype, where, payload = (as_text(x, errors="surrogateescape") for x in reply)
    if state == "unknown":
        return None
    if state == "limit":
        raise LookupLimitReached(
            f"task {task_id}: not found in the first {where} queued/delayed/dead entries "
            "(pass the task type to narrow the search)"
        )
    if state == "cancelled":
        return TaskInfo(task_id, "cancelled", ttype, where=where)
    if state == "done":
        doc = _envelope_doc(payload)
        if doc.get("error_type") == "Cancelled":  # an RPC task's reply of cancel.lua
            return TaskInfo(task_id, "cancelled", ttype, where="before it ran", ok=False)
        return TaskInfo(
            task_id,
            "done",
            ttype,
            ok=bool(doc.get("ok")),
            result=shown(doc.get("result")),
            error=shown(str(doc.get("error", ""))) if not doc.get("ok") else "",
        )
    if state == "dead":
        dead = _dead_letter(ttype, payload)
        return TaskInfo(
            task_id,
            "dead",
            ttype,
            envelope=dead.envelope,
            error=dead.error,
            traceback=dead.traceback,
            due_ms=None,
        )
    if state == "delayed":
        return TaskInfo(
            task_id, "delayed", ttype, due_ms=int(float(where)), envelope=shown(payload)
        )
    return TaskInfo(task_id, state, ttype, where=shown(where), envelope=shown(payload))


class LookupLimitReached(RuntimeError):
    """A task lookup examined its limit of entries without finding the task."""
