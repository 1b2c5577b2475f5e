"""The console's controls of a task type: pause and resume it, edit its
limits, pause, resume or remove its periodic schedules.

Each is a POST behind the operator token (``api._write`` wraps them, as every
state change), made with the one operation the library has for it --
:mod:`taskscale.pausing`, :mod:`taskscale.limits`,
:class:`taskscale.scheduling.schedules.Schedules` -- in the namespace that
holds the type.  A bad input is a ``ValueError`` (400); a schedule that is
not there, or belongs to another type, is :class:`Missing` (404).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from taskscale.dashboard.state import Context
from taskscale.keys import check_name
from taskscale.limits import clear_limits, set_limits
from taskscale.pausing import pause_type, resume_type
from taskscale.scheduling.schedules import Schedules


class Missing(LookupError):
    """What the request names is not there (answered 404)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


def _type(request: Request) -> str:
    return check_name("task type", request.path_params["type"])


def post_pause(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    """``/api/types/T/pause`` and ``/resume``: ``{"changed": bool, "paused": bool}``."""
    op = request.path_params["op"]
    run = {"pause": pause_type, "resume": resume_type}.get(op)
    if run is None:
        raise Missing(f"no type operation {op!r}")
    task_type = _type(request)
    changed = run(task_type, client=ctx.client, keys=ctx.keys_for(task_type))
    return {"changed": changed, "paused": op == "pause", "done": 1}


def _whole_or_none(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return value


def post_limits(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    """``/api/limits/T`` with ``{"rate": "10/s", "burst": 2, "concurrency": 5}``:
    replace T's limits (set_limits); with neither a rate nor a concurrency,
    clear them.  ``{"limits": "rate 10/1s (burst 2), concurrency 5"}``."""
    task_type = _type(request)
    keys = ctx.keys_for(task_type)
    rate = body.get("rate")
    if rate is not None and not isinstance(rate, str):
        raise ValueError(f"rate must be text like 10/s, not {rate!r}")
    rate = (rate or "").strip() or None
    concurrency = _whole_or_none(body, "concurrency")
    burst = _whole_or_none(body, "burst")
    if rate is None and concurrency is None:
        clear_limits(task_type, client=ctx.client, keys=keys)
        return {"limits": "none", "done": 1}
    limits = set_limits(
        task_type,
        rate=rate,
        concurrency=concurrency,
        burst=1 if burst is None else burst,
        client=ctx.client,
        keys=keys,
    )
    return {"limits": limits.describe(), "done": 1}


def post_schedule(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    """``/api/schedules/T/NAME/{pause,resume,remove}`` for a schedule of T."""
    task_type = _type(request)
    schedules = Schedules(ctx.client, keys=ctx.keys_for(task_type))
    name = request.path_params["name"]
    op = request.path_params["op"]
    run = {"pause": schedules.pause, "resume": schedules.resume, "remove": schedules.remove}
    if op not in run:
        raise Missing(f"no schedule operation {op!r}")
    found = schedules.get(name)
    if found is None or found.task_type != task_type:
        raise Missing(f"{task_type} has no schedule {name!r}")
    outcome = run[op](name)
    if outcome == "missing":
        raise Missing(f"{task_type} has no schedule {name!r}")
    return {"outcome": outcome, "done": 1}
