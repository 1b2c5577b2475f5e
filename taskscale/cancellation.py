"""Cancel a task by id: ``taskscale.cancel(task_id)`` / ``taskscale cancel ID``.

One ``cancel.lua`` call: a task still queued or delayed is removed atomically
(nothing can claim it afterwards; an RPC caller is answered with
``Cancelled``; a unique key is released; a fan-out slot passes on); a running
task is flagged for :attr:`taskscale.context.TaskContext.cancelled`, which the
task function checks cooperatively. docs/schema.md has the script's contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.commands.core import Script

from taskscale.connection import RedisLike, client_for
from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text

#: How long a running task's cancellation flag is kept (seconds).
FLAG_TTL_S = 24 * 3600
#: Most ready-list entries read per type while searching for the task.
SEARCH_LIMIT = 200_000


@dataclass(frozen=True)
class CancelResult:
    """``state``: "queued" or "delayed" (removed), "pending" (removed from a
    fan-out's not yet released sub-tasks), "running" (flagged), or "unknown"
    (finished, never enqueued, or not found within the search limit);
    ``where``: the type (queued, delayed), the fan-out id (pending) or the
    worker id (running)."""

    state: str
    where: str

    @property
    def removed(self) -> bool:
        return self.state in ("queued", "delayed", "pending")


def _script(client: RedisClient) -> Script:
    return bound_script(client, "cancel")


def cancel(
    task_id: str,
    *,
    client: RedisLike = None,
    task_type: str | None = None,
    fanout: str | None = None,
    keys: Keys | None = None,
) -> CancelResult:
    """Cancel ``task_id``; ``task_type`` narrows the search when known.

    A sub-task of a fan-out that is still waiting for a slot (in the fan-out's
    pending list, not yet queued) is only found when its fan-out id is given
    as ``fanout``; it is then counted as failed for its fan-out."""
    if not isinstance(task_id, str) or not task_id or '"' in task_id or "\\" in task_id:
        raise ValueError(f"invalid task id {task_id!r}")
    if task_type is not None:
        check_name("task type", task_type)
    if fanout is not None:
        check_name("fan-out id", fanout)
    conn = client_for(client)
    keys = Keys.or_env(keys)
    state, where = _script(conn)(
        keys=[keys.types, keys.workers],
        args=[keys.prefix, task_id, task_type or "", FLAG_TTL_S, SEARCH_LIMIT, fanout or ""],
        client=conn,
    )
    return CancelResult(as_text(state), as_text(where))


def is_cancelled(client: RedisClient, keys: Keys, task_id: str) -> bool:
    """Whether ``task_id`` was asked to stop while running."""
    return bool(client.exists(keys.cancel(task_id)))
