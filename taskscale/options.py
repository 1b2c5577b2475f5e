"""Task options: retries, retry backoff, run timeout and result TTL.

They are declared as defaults where the function is defined
(``@task("fetch", max_retries=5, timeout=30)``) -- which is the *worker's*
process -- and set per enqueue by a producer (``enqueue(...,
options=TaskOptions(timeout=5))``), which writes them into the envelope. The
worker resolves each option for each run: the envelope's field if present,
else the decorator's default, else the runtime's. So a producer that never
imports the task module, or is written in another language, can set any of
them with plain envelope fields (docs/schema.md, "The task envelope"):

=====================  =====================================================
``max_retries``        retries after the first failure before dead-lettering
``retry_backoff_ms``   an integer: the base of the exponential backoff
                       (base * 2**attempts, +-jitter); or an array: the
                       delay before retry 1, 2, ... (the last one repeats)
``retry_backoff_max_ms``  the cap of the exponential backoff
``timeout_ms``         the run timeout (see :mod:`taskscale.worker.timeouts`)
``reply_ttl``          seconds an RPC reply is kept (the result TTL)
=====================  =====================================================

Nothing here talks to Redis.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskscale.checks import MAX_SECONDS
from taskscale.envelope import DEFAULT_MAX_RETRIES
from taskscale.envelope import DEFAULT_REPLY_TTL_S as DEFAULT_RESULT_TTL_S


def _seconds(name: str, value: float | None, *, positive: bool = True) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    if value <= 0 if positive else value < 0:
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} seconds, not {value!r}")
    if value > MAX_SECONDS:
        raise ValueError(f"{name} must be at most {MAX_SECONDS} s (10 years), not {value!r}")


@dataclass(frozen=True)
class TaskOptions:
    """Options of a task; ``None`` leaves an option to the next level down
    (per enqueue -> the ``@task`` decorator -> the runtime default)."""

    #: Retries after the first failure (0 = dead-letter at the first failure).
    max_retries: int | None = None
    #: Seconds: a number is the base of an exponential backoff, a sequence is
    #: a schedule (the delay before retry 1, 2, ...; its last value repeats).
    retry_backoff: float | Sequence[float] | None = None
    #: Seconds: the cap of the exponential backoff (not used by a schedule).
    retry_backoff_max: float | None = None
    #: Seconds a run may take; a run over it is failed (taskscale.worker.timeouts).
    timeout: float | None = None
    #: Seconds an RPC reply is kept for its caller.
    result_ttl: int | None = None

    def __post_init__(self) -> None:
        retries = self.max_retries
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        ):
            raise ValueError(f"max_retries must be an integer >= 0, not {retries!r}")
        backoff = self.retry_backoff
        if isinstance(backoff, Sequence) and not isinstance(backoff, str | bytes):
            if not backoff:
                raise ValueError("a retry_backoff schedule needs at least one delay")
            for step in backoff:
                _seconds("each retry_backoff delay", step, positive=False)
            object.__setattr__(self, "retry_backoff", tuple(backoff))
        else:
            _seconds("retry_backoff", backoff)  # type: ignore[arg-type]
        _seconds("retry_backoff_max", self.retry_backoff_max)
        _seconds("timeout", self.timeout)
        ttl = self.result_ttl
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= MAX_SECONDS
        ):
            raise ValueError(f"result_ttl must be whole seconds, 1 to 10 years, not {ttl!r}")

    def envelope_fields(self) -> dict[str, Any]:
        """The envelope fields that carry the options that are set."""
        fields: dict[str, Any] = {}
        if self.max_retries is not None:
            fields["max_retries"] = self.max_retries
        if isinstance(self.retry_backoff, tuple):
            fields["retry_backoff_ms"] = [round(s * 1000) for s in self.retry_backoff]
        elif self.retry_backoff is not None:
            fields["retry_backoff_ms"] = max(1, round(float(self.retry_backoff) * 1000))  # type: ignore[arg-type]
        if self.retry_backoff_max is not None:
            fields["retry_backoff_max_ms"] = max(1, round(self.retry_backoff_max * 1000))
        if self.timeout is not None:
            fields["timeout_ms"] = max(1, round(self.timeout * 1000))
        if self.result_ttl is not None:
            fields["reply_ttl"] = self.result_ttl
        return fields


@dataclass(frozen=True)
class Resolved:
    """The options one run goes by (envelope, else decorator, else runtime)."""

    max_retries: int = DEFAULT_MAX_RETRIES
    #: Exponential backoff base / cap in seconds (None: the worker's policy).
    backoff_base_s: float | None = None
    backoff_max_s: float | None = None
    #: A fixed schedule of delays in seconds, or None.
    backoff_schedule_s: tuple[float, ...] | None = None
    timeout_s: float | None = None
    result_ttl_s: int = DEFAULT_RESULT_TTL_S


def _int_field(fields: Mapping[str, Any], name: str, low: int) -> int | None:
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value) if value >= low else None


#: The envelope fields :func:`resolve` reads.
_OPTION_FIELDS = (
    "max_retries",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "timeout_ms",
    "reply_ttl",
)
#: Resolved options by (declared, each option field's type and value): a
#: worker runs the same few combinations over and over (most envelopes carry
#: none of them), so resolving is a dict look-up per task, not five parses.
_resolved: dict[tuple[Any, ...], Resolved] = {}
_RESOLVED_MAX = 1024


#: Resolved options of envelopes that set none of them, by the declared
#: options' identity (the registry keeps each task's one object): the usual
#: case, one look-up without hashing a dataclass.
_plain: dict[int, tuple[TaskOptions | None, Resolved]] = {}


def resolve(fields: Mapping[str, Any], declared: TaskOptions | None) -> Resolved:
    """Each option from the envelope ``fields`` when set there (a malformed
    value counts as unset), else from ``declared`` (the decorator), else the
    runtime default."""
    if not any(name in fields for name in _OPTION_FIELDS):
        kept = _plain.get(id(declared))
        if kept is not None and kept[0] is declared:  # always, while it is kept
            return kept[1]
        plain = _resolve(fields, declared)
        if len(_plain) >= _RESOLVED_MAX:
            _plain.clear()
        _plain[id(declared)] = (declared, plain)  # declared kept: its id is not reused
        return plain
    values = [fields.get(name) for name in _OPTION_FIELDS]
    key = (declared, *((type(v), v) for v in values))  # the type: True == 1, 1 == 1.0
    try:
        found = _resolved.get(key)
    except TypeError:  # a list (a backoff schedule): not kept
        return _resolve(fields, declared)
    if found is None:
        found = _resolve(fields, declared)
        if len(_resolved) >= _RESOLVED_MAX:
            _resolved.clear()
        _resolved[key] = found
    return found


def _resolve(fields: Mapping[str, Any], declared: TaskOptions | None) -> Resolved:
    declared = declared or TaskOptions()
    retries = _int_field(fields, "max_retries", 0)
    if retries is None:
        retries = declared.max_retries if declared.max_retries is not None else DEFAULT_MAX_RETRIES
    base_s: float | None = None
    schedule: tuple[float, ...] | None = None
    raw_backoff = fields.get("retry_backoff_ms")
    if isinstance(raw_backoff, list) and raw_backoff:
        steps = [_int_field({"v": v}, "v", 0) for v in raw_backoff]
        if all(step is not None for step in steps):
            schedule = tuple(step / 1000 for step in steps if step is not None)
    elif (base_ms := _int_field(fields, "retry_backoff_ms", 1)) is not None:
        base_s = base_ms / 1000
    if base_s is None and schedule is None:
        if isinstance(declared.retry_backoff, tuple):
            schedule = declared.retry_backoff
        elif declared.retry_backoff is not None:
            base_s = float(declared.retry_backoff)  # type: ignore[arg-type]
    max_ms = _int_field(fields, "retry_backoff_max_ms", 1)
    timeout_ms = _int_field(fields, "timeout_ms", 1)
    ttl = _int_field(fields, "reply_ttl", 1)
    return Resolved(
        max_retries=retries,
        backoff_base_s=base_s,
        backoff_max_s=max_ms / 1000 if max_ms is not None else declared.retry_backoff_max,
        backoff_schedule_s=schedule,
        timeout_s=timeout_ms / 1000 if timeout_ms is not None else declared.timeout,
        result_ttl_s=ttl
        if ttl is not None
        else (declared.result_ttl if declared.result_ttl is not None else DEFAULT_RESULT_TTL_S),
    )
