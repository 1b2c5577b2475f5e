"""Periodic schedules: ``taskscale.schedule(name, type, *args, cron=... | every=...)``.

A schedule lives in Redis (``{ns}:schedule:NAME`` and the index
``{ns}:schedules``, docs/schema.md).  Its next occurrence is *materialized*
as an ordinary delayed task, id ``schedule.NAME.<unix ms>``, so promotion,
the controller's look-ahead, ``taskscale status`` and the metrics see it
like any other delayed task: workers are warm when a cron fires.

Who advances it: the ``taskscale scheduler`` processes.  When a schedule's
occurrence is due, each scheduler that notices computes the following one
(cron and time zone in Python, on the Redis clock) and calls
``schedule_advance.lua`` with the occurrence it saw; the script refuses when
another scheduler got there first (compare-and-set), so any number of
schedulers enqueue each occurrence exactly once.  Nothing is lost across a
restart: the pending occurrence is already in Redis.  A tick missed while
every scheduler was down runs once on return (the pending occurrence, late),
or each missed tick in turn with ``catch_up=True``.

Adding a schedule with the same definition again changes nothing, so an
application may call :func:`schedule` at every start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

from taskscale import envelope
from taskscale.connection import RedisLike, client_for
from taskscale.durations import span
from taskscale.keys import DEFAULT_PRIORITY, Keys, check_name, check_schedule_name
from taskscale.luascripts import bound_script as _script
from taskscale.options import TaskOptions, enqueue_fields
from taskscale.producer import default_producer
from taskscale.redis_urls import RedisClient
from taskscale.scheduling.schedule_times import Timing, following, timing
from taskscale.server_clock import server_time
from taskscale.text import as_text

log = logging.getLogger("taskscale.schedules")

#: Most due schedules one scheduler pass advances (the rest in the next pass).
ADVANCE_BATCH = 100


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as stored in Redis (``next_ms`` 0: no occurrence pending)."""

    name: str
    task_type: str
    timing: Timing
    paused: bool
    next_ms: int
    last_ms: int
    occurrences: int
    rev: int
    task: dict[str, Any]
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of ``taskscale schedules list --json`` and status."""
        return {
            "name": self.name,
            "type": self.task_type,
            "cron": self.timing.cron or None,
            "every_s": self.timing.every_ms / 1000 if self.timing.every_ms else None,
            "tz": self.timing.tz or None,
            "catch_up": self.timing.catch_up,
            "paused": self.paused,
            "next_ms": self.next_ms or None,
            "last_ms": self.last_ms or None,
            "occurrences": self.occurrences,
            "args": self.task.get("args", []),
            "kwargs": self.task.get("kwargs", {}),
            "priority": self.task.get("priority", DEFAULT_PRIORITY),
            "error": self.error or None,
        }


class Schedules:
    """Adds, lists, pauses, resumes and removes schedules of one namespace."""

    def __init__(self, client: RedisLike = None, *, keys: Keys | None = None) -> None:
        self.redis = client_for(client)
        self.keys = Keys.or_env(keys)

    def add(
        self,
        name: str,
        task_type: str,
        /,
        *args: Any,
        cron: str | None = None,
        every: float | None = None,
        tz: str | None = None,
        priority: int | str = DEFAULT_PRIORITY,
        max_retries: int | None = None,
        options: TaskOptions | None = None,
        catch_up: bool = False,
        **kwargs: Any,
    ) -> tuple[str, ScheduleInfo]:
        """Create or replace schedule ``name``; return ("created" | "updated" |
        "unchanged", the stored schedule with its first occurrence).  Each
        occurrence carries ``options`` (and ``max_retries``, which wins) like an
        enqueue; unset ones are left to the task's ``@task`` defaults."""
        check_schedule_name(name)
        check_name("task type", task_type)
        spec = timing(cron=cron, every=every, tz=tz, catch_up=catch_up)
        retries, fields = enqueue_fields(options, max_retries=max_retries)
        _, doc = envelope.build(
            task_type, args, kwargs, priority=priority, max_retries=retries, extra=fields
        )
        template = envelope.encode({k: v for k, v in _loads(doc).items() if k != "id"})
        outcome, _ = _script(self.redis, "schedule_add")(
            keys=[self.keys.schedules],
            args=[
                self.keys.prefix,
                name,
                task_type,
                template,
                spec.cron,
                str(spec.every_ms) if spec.every_ms else "",
                spec.tz,
                "1" if spec.catch_up else "0",
            ],
            client=self.redis,
        )
        # Materialize the first occurrence now, so it is visible at once; a
        # scheduler would do the same within moments (and one may race us).
        advance_due(self.redis, self.keys, names=[name])
        found = self.get(name)
        if found is None:  # removed by someone else in between
            raise LookupError(f"schedule {name} was removed while being added")
        return as_text(outcome), found

    def get(self, name: str) -> ScheduleInfo | None:
        check_schedule_name(name)
        return _info(name, self.redis.hgetall(self.keys.schedule(name)))

    def all(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        return list_schedules(self.redis, self.keys)

    def pause(self, name: str) -> str:
        """Withdraw the pending occurrence and stop; "done", "unchanged" or "missing"."""
        return self._control(name, "pause")

    def resume(self, name: str) -> str:
        """Start again from the next occurrence after now."""
        result = self._control(name, "resume")
        if result == "done":
            advance_due(self.redis, self.keys, names=[name])
        return result

    def remove(self, name: str) -> str:
        """Delete the schedule and its pending occurrence; "done" or "missing"."""
        return self._control(name, "remove")

    def _control(self, name: str, mode: str) -> str:
        check_schedule_name(name)
        reply = _script(self.redis, "schedule_control")(
            keys=[self.keys.schedules], args=[self.keys.prefix, name, mode], client=self.redis
        )
        return as_text(reply)


def schedule(
    name: str,
    task_type: str,
    /,
    *args: Any,
    cron: str | None = None,
    every: float | None = None,
    tz: str | None = None,
    priority: int | str = DEFAULT_PRIORITY,
    max_retries: int | None = None,
    options: TaskOptions | None = None,
    catch_up: bool = False,
    **kwargs: Any,
) -> ScheduleInfo:
    """Run ``task_type(*args, **kwargs)`` periodically: ``cron="*/5 * * * *"``
    (5 fields, or 6 with seconds first; in time zone ``tz``, default UTC) or
    ``every=seconds``.  Redis is the default producer's (``TASKSCALE_REDIS_URL``,
    ``TASKSCALE_NAMESPACE``); use :class:`Schedules` for another client."""
    producer = default_producer()
    _, info = Schedules(producer.redis, keys=producer.keys).add(
        name,
        task_type,
        *args,
        cron=cron,
        every=every,
        tz=tz,
        priority=priority,
        max_retries=max_retries,
        options=options,
        catch_up=catch_up,
        **kwargs,
    )
    return info


def list_schedules(client: RedisClient, keys: Keys) -> list[ScheduleInfo]:
    """Every schedule of the namespace, sorted by name (one pipelined read)."""
    names = sorted(as_text(n) for n in client.zrange(keys.schedules, 0, -1))
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(keys.schedule(name))
    found = [_info(name, record) for name, record in zip(names, pipe.execute(), strict=True)]
    return [info for info in found if info is not None]


def advance_due(
    client: RedisClient,
    keys: Keys,
    *,
    now_ms: int | None = None,
    names: list[str] | None = None,
    limit: int = ADVANCE_BATCH,
) -> list[tuple[str, int]]:
    """Materialize the next occurrence of every schedule whose current one is
    due (or of ``names``, if due); return ``(name, new next ms)`` of those this
    call advanced (the others were advanced by another scheduler, or paused)."""
    if now_ms is None:
        now_ms = server_time(client, keys).ms
    if names is None:
        names = [as_text(n) for n in client.zrangebyscore(keys.schedules, "-inf", now_ms, 0, limit)]
    if not names:
        return []
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(keys.schedule(name))
    script = _script(client, "schedule_advance")
    advanced: list[tuple[str, int]] = []
    for name, record in zip(names, pipe.execute(), strict=True):
        info = _info(name, record)
        parked = b"error" in record or "error" in record
        if info is None or info.paused or parked or info.next_ms > now_ms:
            continue
        try:
            if info.error:  # a definition written by hand or by another language
                raise ValueError(info.error)
            new_next, error = following(info.timing, info.next_ms, now_ms), ""
        except ValueError as exc:
            new_next, error = -1, str(exc)
            log.error("schedule %s: %s; parked until it is replaced", name, exc)
        try:
            ok, value = script(
                keys=[keys.schedules, keys.types],
                args=[keys.prefix, name, info.rev, info.next_ms, new_next, error],
                client=client,
            )
        except redis.ResponseError as exc:  # one broken schedule must not stop the others
            log.error("schedule %s: %s", name, exc)
            continue
        if int(ok):
            advanced.append((name, int(value)))
    return advanced


def render(found: list[dict[str, Any]], *, now_s: float) -> list[str]:
    """The schedules table of ``schedules list`` and ``taskscale status``, from
    :meth:`ScheduleInfo.as_dict` forms (what ``status --json`` holds)."""
    if not found:
        return ["(no schedules)"]
    rows = [["SCHEDULE", "TYPE", "WHEN", "NEXT DUE", "PAUSED", "OCCURRENCES"]]
    for s in found:
        if s["error"]:
            due = "broken: " + s["error"]
        elif s["paused"] or not s["next_ms"]:
            due = "-"
        else:
            due = f"in {span(s['next_ms'] / 1000 - now_s)}"
        when = f"every {s['every_s']:g}s" if s["every_s"] else f"cron {s['cron']}"
        if s["tz"]:
            when += f" ({s['tz']})"
        paused = "yes" if s["paused"] else "no"
        rows.append([s["name"], s["type"], when, due, paused, str(s["occurrences"])])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _info(name: str, record: Mapping[bytes | str, bytes | str]) -> ScheduleInfo | None:
    fields = {as_text(k): as_text(v) for k, v in record.items()}
    if "type" not in fields:
        return None
    error = fields.get("error", "")
    try:
        task = _loads(fields.get("task", "{}"))
    except ValueError as exc:
        task, error = {}, error or f"the task template is not a JSON object: {exc}"
    try:
        spec = timing(
            cron=fields.get("cron") or None,
            every=int(fields["every_ms"]) / 1000 if fields.get("every_ms") else None,
            tz=fields.get("tz") or None,
            catch_up=fields.get("catch_up") == "1",
        )
    except (ValueError, KeyError) as exc:  # written by hand or another language
        spec = Timing(cron=fields.get("cron", ""), tz=fields.get("tz", ""))
        error = error or str(exc)
    return ScheduleInfo(
        name=name,
        task_type=fields["type"],
        timing=spec,
        paused=fields.get("paused") == "1",
        next_ms=_int(fields.get("next_ms")),
        last_ms=_int(fields.get("last_ms")),
        occurrences=_int(fields.get("occurrences")),
        rev=_int(fields.get("rev")),
        task=task,
        error=error,
    )


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _loads(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("the task template is not a JSON object")
    return value
