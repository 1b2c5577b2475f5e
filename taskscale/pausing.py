"""Pausing a task type: its tasks stay queued until it is resumed.

``pause_type("email")`` (``taskscale types pause email``, the console's Pause
button) adds the type to the ``{ns}:paused`` hash (type -> unix ms since, on
the Redis clock) in one ``type_pause.lua`` call.  Nothing else enforces it:
``claim.lua`` reads the hash inside the atomic claim, so no worker, in any
language, claims a paused type (a task already running finishes); producers
still enqueue.  The controller reads the same hash: a paused type's waiting
tasks are not demand, and a scaler whose types are all paused holds its
replicas (reason ``Paused``).  ``resume_type`` removes the field and wakes
the type's idle workers.
"""

from __future__ import annotations

from typing import Any

from taskscale.connection import RedisLike, client_for
from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script
from taskscale.text import as_text


def pause_type(task_type: str, *, client: RedisLike = None, keys: Keys | None = None) -> bool:
    """Pause ``task_type``: workers stop claiming it; True if it was not paused."""
    return _call(task_type, "pause", client, keys)


def resume_type(task_type: str, *, client: RedisLike = None, keys: Keys | None = None) -> bool:
    """Resume ``task_type`` (its idle workers wake); True if it was paused."""
    return _call(task_type, "resume", client, keys)


def paused_types(*, client: RedisLike = None, keys: Keys | None = None) -> dict[str, int]:
    """Every paused type -> unix ms it was paused since (Redis clock)."""
    conn = client_for(client)
    keys = Keys.or_env(keys)
    return parse_paused(conn.hgetall(keys.paused))


def parse_paused(raw: dict[Any, Any]) -> dict[str, int]:
    """Decode HGETALL ``{ns}:paused`` (a value that is not a number reads as 0)."""
    out: dict[str, int] = {}
    for field, value in raw.items():
        try:
            out[as_text(field)] = int(as_text(value))
        except ValueError:
            out[as_text(field)] = 0
    return dict(sorted(out.items()))


def _call(task_type: str, mode: str, client: RedisLike, keys: Keys | None) -> bool:
    check_name("task type", task_type)
    conn = client_for(client)
    keys = Keys.or_env(keys)
    script = bound_script(conn, "type_pause")
    return bool(script(keys=[keys.paused], args=[keys.prefix, task_type, mode], client=conn))
