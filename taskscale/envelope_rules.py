"""The envelope's validation rules, stated once: docs/schema.md's field table.

One function, :func:`problem`, says why a decoded envelope is not one taskscale
can carry (a one-line reason naming the field), or None.  The producer
(:func:`taskscale.envelope.build`) checks what it sends with it, the worker's
decode (:func:`taskscale.envelope.decode`) checks what it claimed with it (a
task it cannot run is dead-lettered with the reason), and ``enqueue.lua``
holds the same rules in Lua (tests/envelope/test_rules_agree.py feeds both
the same envelopes).

The rules, in short: every number is finite and an integer (``5`` and ``5.0``
alike) between its least value and :data:`MAX_INT` (2^53 - 1, what every JSON
reader holds exactly); durations at most 10 years; ``args`` an array and
``kwargs`` an object, nested at most :data:`MAX_DEPTH` levels; names in the
name alphabet; ``reply_to`` only a reply key of the namespace
(``{NS}:reply:<id>``: never a queue, hash or any other key).  Unknown fields
are allowed (a newer producer may add some) and kept.

Cheap for a valid envelope: one dict look-up per field present, and the
nesting walk only when the text holds more brackets than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from taskscale.checks import MAX_SECONDS

#: The largest integer an envelope field may hold (exact in every JSON reader).
MAX_INT = 2**53 - 1
#: The longest duration an envelope field may hold, in ms (10 years).
MAX_MS = MAX_SECONDS * 1000
#: The deepest nesting of arrays and objects in ``args`` and ``kwargs``.
MAX_DEPTH = 32
#: The most delays a ``retry_backoff_ms`` schedule may list.
MAX_SCHEDULE = 100

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_UNIQUE = re.compile(r"[A-Za-z0-9_.\-:]{1,200}")
_REPLY = re.compile(r"\{([A-Za-z0-9_.\-]{1,128})\}:reply:([A-Za-z0-9_.\-]{1,128})")


def _integer(value: Any, least: int, most: int) -> bool:
    if type(value) is int:  # the usual case first
        return least <= value <= most
    if type(value) is float:
        return math.isfinite(value) and value.is_integer() and least <= value <= most
    return False


def _int_rule(least: int, most: int = MAX_INT) -> Callable[[Any], str | None]:
    text = f"must be an integer {least} to {most}"

    def check(value: Any) -> str | None:
        return None if _integer(value, least, most) else text

    return check


def _name(value: Any) -> str | None:
    if isinstance(value, str) and _NAME.fullmatch(value):
        return None
    return "must be 1-128 characters of A-Z a-z 0-9 _ . -"


def _backoff(value: Any) -> str | None:
    if isinstance(value, list):
        if 1 <= len(value) <= MAX_SCHEDULE and all(_integer(v, 0, MAX_MS) for v in value):
            return None
        return (
            f"must be an integer 1 to {MAX_MS} or a list of 1-{MAX_SCHEDULE} integers 0 to {MAX_MS}"
        )
    if _integer(value, 1, MAX_MS):
        return None
    return f"must be an integer 1 to {MAX_MS} or a list of 1-{MAX_SCHEDULE} integers 0 to {MAX_MS}"


def _unique_key(value: Any) -> str | None:
    if isinstance(value, str) and _UNIQUE.fullmatch(value):
        return None
    return "must be 1-200 characters of A-Z a-z 0-9 _ . - :"


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


# A reader that cannot tell [] from {} (Lua's cjson) may write either when
# empty: an empty object is an empty array and the other way round.
def _args(value: Any) -> str | None:
    return None if isinstance(value, list) or value == {} else "must be an array"


def _kwargs(value: Any) -> str | None:
    return None if isinstance(value, dict) or value == [] else "must be an object"


#: The check of every known field but ``reply_to`` (which needs the namespace).
RULES: Mapping[str, Callable[[Any], str | None]] = {
    "id": _name,
    "type": _name,
    "args": _args,
    "kwargs": _kwargs,
    "priority": _int_rule(0, 9),
    "enqueued_ms": _int_rule(0),
    "due_ms": _int_rule(0),
    "attempts": _int_rule(0),
    "max_retries": _int_rule(0),
    "retry_backoff_ms": _backoff,
    "retry_backoff_max_ms": _int_rule(1, MAX_MS),
    "timeout_ms": _int_rule(1, MAX_MS),
    "reply_ttl": _int_rule(1, MAX_SECONDS),
    "fanout": _name,
    "fanout_seq": _int_rule(0),
    "fanout_collect": _bool,
    "unique_key": _unique_key,
    "unique_for_ms": _int_rule(0, MAX_MS),
    "reaped": _int_rule(0),
}
#: Fields an envelope must have.
REQUIRED = ("id", "type")


def is_reply_key(value: Any, prefix: str | None = None) -> bool:
    """``value`` is a reply key: ``{NS}:reply:<id>``, of the namespace of
    ``prefix`` (``"{NS}:"``) when it is given."""
    if not isinstance(value, str):
        return False
    match = _REPLY.fullmatch(value)
    return match is not None and (prefix is None or value.startswith(prefix))


def problem(doc: Any, *, prefix: str | None = None, text: str | bytes = "") -> str | None:
    """Why ``doc`` (a decoded envelope) breaks the rules, one line naming the
    field, or None.  ``prefix``: the namespace's ``"{NS}:"`` its ``reply_to``
    must belong to; ``text``: the JSON it was decoded from, when known (the
    nesting walk is skipped when it holds too few brackets to be too deep)."""
    if not isinstance(doc, dict):
        return "the envelope is not a JSON object"
    for name in REQUIRED:
        if name not in doc:
            return f'"{name}" is missing'
    for name, value in doc.items():
        rule = RULES.get(name)
        if rule is not None:
            why = rule(value)
            if why is not None:
                return f'"{name}" {why}, not {_shown(value)}'
        elif name == "reply_to" and not is_reply_key(value, prefix):
            where = f"{prefix}reply:<id>" if prefix else "{NS}:reply:<id>"
            return f'"reply_to" must be a reply key {where}, not {_shown(value)}'
    if _may_be_deep(text):
        for name in ("args", "kwargs"):
            if _depth(doc.get(name), MAX_DEPTH + 1) > MAX_DEPTH:
                return f'"{name}" is nested deeper than {MAX_DEPTH} levels'
    return None


def _may_be_deep(text: str | bytes) -> bool:
    if not text:  # unknown: walk
        return True
    if isinstance(text, str):
        return text.count("[") + text.count("{") > MAX_DEPTH
    return text.count(b"[") + text.count(b"{") > MAX_DEPTH


def _depth(value: Any, limit: int) -> int:
    """Nesting levels of ``value`` (0 for a scalar), counted no further than ``limit``."""
    if limit <= 0 or not isinstance(value, list | dict):
        return 0
    items = value.values() if isinstance(value, dict) else value
    deepest = 0
    for item in items:
        if isinstance(item, list | dict):
            deepest = max(deepest, _depth(item, limit - 1))
            if deepest >= limit - 1:
                break
    return 1 + deepest


def _shown(value: Any) -> str:
    """A value as the error shows it: short, and never a walk of a nested one."""
    if isinstance(value, list | dict):
        return "an array" if isinstance(value, list) else "an object"
    text = repr(value[:60] if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."
