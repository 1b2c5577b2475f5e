"""Task options: retries, retry backoff, run timeout and result TTL.

They are declared as defaults where the function is defined
(``@task("fetch", max_retries=5, timeout=30)``) -- which is the *worker's*
process -- and set per enqueue by a producer (``enqueue(...,
options=TaskOptions(timeout=5))``), which writes them into the envelope. The
worker resolves each option for each run: the envelope's field if present,
else the decorator's default, else the runtime's. So a producer that never
imports the task module, or is written in another language, can set any of
them with plain envelope fields (docs/schema.md, "The task envelope").

Every option is one row of :data:`OPTIONS`: its name (a field of
:class:`TaskOptions` and :class:`Resolved`, a keyword of ``@task``), its
envelope field and unit, its check and its default.  Writing the envelope,
resolving a run and checking what a user gives all go by that table;
tests/options/test_option_table.py holds the typed declarations below and
docs/schema.md to it.

Nothing here talks to Redis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from taskscale.checks import MAX_SECONDS


def _seconds(name: str, value: Any, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    if value <= 0 if positive else value < 0:
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} seconds, not {value!r}")
    if value > MAX_SECONDS:
        raise ValueError(f"{name} must be at most {MAX_SECONDS} s (10 years), not {value!r}")
    return value


def _retries(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, not {value!r}")
    return value


def _backoff(name: str, value: Any) -> float | tuple[float, ...]:
    """Seconds: the base of an exponential backoff, or a schedule of delays."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if not value:
            raise ValueError(f"a {name} schedule needs at least one delay")
        return tuple(_seconds(f"each {name} delay", step, positive=False) for step in value)
    return _seconds(name, value)


def _ttl(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SECONDS:
        raise ValueError(f"{name} must be whole seconds, 1 to 10 years, not {value!r}")
    return value


def _whole(value: Any, least: int) -> int | None:
    """An envelope field's number, or None when it is malformed or below ``least``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value) if value >= least else None


@dataclass(frozen=True)
class Option:
    """One task option: how it is checked, written, read back and defaulted."""

    #: Its name: a field of TaskOptions and Resolved, a keyword of ``@task``.
    name: str
    #: The envelope field that carries it.
    field: str
    #: Envelope units per unit of the option: 1000 for seconds sent as ms.
    scale: int
    #: The least value of the envelope field (a smaller one counts as unset).
    least: int
    #: Checks a value given in Python, naming it (ValueError); returns it normalised.
    check: Callable[[str, Any], Any]
    #: The runtime's, when neither the envelope nor ``@task`` sets it
    #: (None: no timeout / the worker's retry policy).
    default: Any
    #: The option may also be a schedule: a list of values (each >= 0).
    schedule: bool = False

    def to_field(self, value: Any) -> Any:
        """A checked value as its envelope field's value."""
        if isinstance(value, tuple):
            return [round(step * self.scale) for step in value]
        return max(self.least, round(value * self.scale))

    def from_field(self, raw: Any) -> Any:
        """The envelope field's value as the option's, None when malformed."""
        if self.schedule and isinstance(raw, list):
            steps = [_whole(step, 0) for step in raw]
            if not steps or None in steps:
                return None
            return tuple(step / self.scale for step in steps if step is not None)
        number = _whole(raw, self.least)
        if number is None or self.scale == 1:
            return number
        return number / self.scale


#: Every task option.
OPTIONS: tuple[Option, ...] = (
    Option("max_retries", "max_retries", scale=1, least=0, check=_retries, default=3),
    Option(
        "retry_backoff",
        "retry_backoff_ms",
        scale=1000,
        least=1,
        check=_backoff,
        default=None,
        schedule=True,
    ),
    Option("retry_backoff_max", "retry_backoff_max_ms", 1000, 1, _seconds, default=None),
    Option("timeout", "timeout_ms", scale=1000, least=1, check=_seconds, default=None),
    Option("result_ttl", "reply_ttl", scale=1, least=1, check=_ttl, default=300),
)
#: Each option by its name.
OPTION: Mapping[str, Option] = {option.name: option for option in OPTIONS}
#: The runtime defaults, for the code that writes one into an envelope itself.
DEFAULT_MAX_RETRIES: int = OPTION["max_retries"].default
DEFAULT_RESULT_TTL_S: int = OPTION["result_ttl"].default


class TaskOptionArgs(TypedDict, total=False):
    """The keyword arguments of ``@task(...)``: the fields of :class:`TaskOptions`."""

    max_retries: int | None
    retry_backoff: float | Sequence[float] | None
    retry_backoff_max: float | None
    timeout: float | None
    result_ttl: int | None


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
        for option in OPTIONS:
            value = getattr(self, option.name)
            if value is not None:
                object.__setattr__(self, option.name, option.check(option.name, value))

    def envelope_fields(self) -> dict[str, Any]:
        """The envelope fields that carry the options that are set."""
        return {
            option.field: option.to_field(value)
            for option in OPTIONS
            if (value := getattr(self, option.name)) is not None
        }


def enqueue_fields(
    options: TaskOptions | None, *, max_retries: int | None = None
) -> tuple[int | None, dict[str, Any]]:
    """What an enqueue writes for ``options``: ``max_retries`` (the one given
    wins over the options'; None: not written) for ``envelope.build``, and
    the envelope fields of the other options."""
    if options is None:
        return max_retries, {}
    if not isinstance(options, TaskOptions):
        raise TypeError(f"options must be a TaskOptions, not {type(options).__name__}")
    fields = options.envelope_fields()
    fields.pop(OPTION["max_retries"].field, None)
    return (options.max_retries if max_retries is None else max_retries), fields


@dataclass(frozen=True)
class Resolved:
    """The options one run goes by (envelope, else decorator, else runtime),
    in the units of :class:`TaskOptions`."""

    max_retries: int = DEFAULT_MAX_RETRIES
    #: Seconds: an exponential backoff's base, or a schedule (None: the worker's policy).
    retry_backoff: float | tuple[float, ...] | None = OPTION["retry_backoff"].default
    #: Seconds: the exponential backoff's cap (None: the worker's policy).
    retry_backoff_max: float | None = OPTION["retry_backoff_max"].default
    timeout: float | None = OPTION["timeout"].default
    result_ttl: int = DEFAULT_RESULT_TTL_S

    @property
    def backoff_base_s(self) -> float | None:
        """The exponential backoff's base in seconds, unless a schedule is set."""
        backoff = self.retry_backoff
        return None if backoff is None or isinstance(backoff, tuple) else float(backoff)

    @property
    def backoff_schedule_s(self) -> tuple[float, ...] | None:
        """The fixed schedule of delays in seconds, or None."""
        return self.retry_backoff if isinstance(self.retry_backoff, tuple) else None


#: The envelope fields :func:`resolve` reads.
_OPTION_FIELDS = tuple(option.field for option in OPTIONS)
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
    values: dict[str, Any] = {}
    for option in OPTIONS:
        value = option.from_field(fields.get(option.field))
        if value is None:
            value = getattr(declared, option.name)
        values[option.name] = option.default if value is None else value
    return Resolved(**values)
