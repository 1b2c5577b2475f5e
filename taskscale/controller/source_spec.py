"""Where a task type's demand is read from: a TaskScaler's ``source`` settings, pure.

Why it exists: a TaskScaler may scale workers that are not taskscale's --
Celery or RQ workers, or anything that takes work from plain Redis lists.
Their queues are laid out by those libraries, not by taskscale.keys, so a
type names the source it is read from and, optionally, which queues and
which ``ACTIVE_TASKS``/``IDLE_SINCE`` fields to read:

- ``source``: ``taskscale`` (the default: taskscale's own schema), ``celery``
  (kombu's Redis transport), ``rq`` or ``list``; set for the whole scaler in
  ``spec.source`` and overridable per entry of ``taskTypes``;
- ``queues``: the Celery queues, RQ queues or Redis lists holding the type's
  waiting work (default: the type's name);
- ``tasks``: the fields of ``ACTIVE_TASKS``/``IDLE_SINCE`` the type's running
  work is counted under -- the task names the Celery/RQ integrations or
  ``taskscale.track`` count by (default: the type's name).

taskscale.controller.sources reads what this module describes; config.py
calls :func:`type_source` for each entry.  Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from taskscale.keys import check_name

TASKSCALE = "taskscale"
CELERY = "celery"
RQ = "rq"
LIST = "list"
#: Every value ``source`` may take.
SOURCE_KINDS = (TASKSCALE, CELERY, RQ, LIST)

#: A queue or list name: printable, no spaces, at most 200 characters (they are
#: passed as key names, never built into patterns).
_QUEUE_RE = re.compile(r"^[!-~]{1,200}$")
MAX_QUEUES = 20


@dataclass(frozen=True)
class TypeSource:
    """Where one task type that is not taskscale's is read from."""

    task_type: str
    kind: str  #: celery, rq or list (never taskscale: those types need no entry)
    queues: tuple[str, ...]
    tasks: tuple[str, ...]


def type_source(entry: Mapping[str, object], *, default_kind: str) -> TypeSource | None:
    """The source of one ``taskTypes`` entry (None = taskscale's own schema).

    Raises ValueError with the field named when the entry can't be applied.
    """
    name = str(entry["name"])
    kind = entry.get("source", default_kind)
    if kind not in SOURCE_KINDS:
        kinds = ", ".join(SOURCE_KINDS)
        raise ValueError(f"source of {name!r} must be one of {kinds}, not {kind!r}")
    if kind == TASKSCALE:
        for field in ("queues", "tasks"):
            if entry.get(field) is not None:
                raise ValueError(
                    f"{field} of {name!r} applies to the celery, rq and list sources only"
                )
        return None
    if entry.get("maxQueueWaitSeconds") is not None:
        raise ValueError(
            f"maxQueueWaitSeconds of {name!r} needs source taskscale"
            f" ({kind} messages carry no enqueue time taskscale can read)"
        )
    queues = _names(entry, "queues", name, check=_check_queue)
    tasks = _names(entry, "tasks", name, check=lambda v: check_name("task name", v))
    return TypeSource(task_type=name, kind=str(kind), queues=queues, tasks=tasks)


def check_kind(value: object) -> str:
    """``spec.source``: one of :data:`SOURCE_KINDS`."""
    if value not in SOURCE_KINDS:
        raise ValueError(f"source must be one of {', '.join(SOURCE_KINDS)}, not {value!r}")
    return str(value)


def _names(
    entry: Mapping[str, object], field: str, type_name: str, *, check: Callable[[str], str]
) -> tuple[str, ...]:
    value = entry.get(field)
    if value is None:
        return (type_name,)
    if not isinstance(value, list) or not value or len(value) > MAX_QUEUES:
        raise ValueError(f"{field} of {type_name!r} must be a list of 1-{MAX_QUEUES} names")
    if len(set(value)) != len(value):
        raise ValueError(f"{field} of {type_name!r} lists a name twice")
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"{field} of {type_name!r}: {item!r} is not a name")
        check(item)
    return tuple(value)


def _check_queue(value: str) -> str:
    if not _QUEUE_RE.match(value):
        raise ValueError(f"invalid queue name {value!r}: 1-200 printable characters, no spaces")
    return value
