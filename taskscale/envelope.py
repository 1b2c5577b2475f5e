"""The task envelope: the JSON object that carries one task through Redis.

Producers build it, the Lua scripts stamp times on it, workers decode it.
It is JSON only -- never pickle, so a queue is not a remote-code-execution
channel -- and its fields are specified in docs/schema.md so producers in
other languages can write it too.  Decoding is strict about what a worker
needs (id, type, args, kwargs) and lenient about the rest (defaults).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskscale.envelope_rules import problem
from taskscale.keys import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_PRIORITY, check_name, parse_priority

_COMPACT = (",", ":")


class EnvelopeError(ValueError):
    """An envelope that can't be built (producer) or decoded (worker)."""


class PayloadTooLarge(EnvelopeError):
    """An envelope over the configured size limit: refused at enqueue."""


@dataclass(slots=True)
class Envelope:
    """A decoded envelope; ``fields`` keeps every field, known or not (the
    task options, ``max_retries``, ``timeout_ms``..., are read from there by
    :func:`taskscale.options.resolve`, the one place that knows them).

    Not frozen: one is built per task run, and a frozen dataclass's
    ``__init__`` costs about twice as much (nothing changes one after decode)."""

    id: str
    type: str
    args: list[Any]
    kwargs: dict[str, Any]
    priority: int = DEFAULT_PRIORITY
    attempts: int = 0
    enqueued_ms: int | None = None
    due_ms: int | None = None
    reply_to: str | None = None
    fanout: str | None = None
    #: Times the reaper returned this task because its worker died running it.
    reaped: int = 0
    fields: dict[str, Any] = field(default_factory=dict, repr=False)


def new_task_id() -> str:
    return uuid.uuid4().hex


def build(
    task_type: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    task_id: str | None = None,
    priority: int | str = DEFAULT_PRIORITY,
    max_retries: int | None = None,
    extra: Mapping[str, Any] | None = None,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    prefix: str | None = None,
) -> tuple[str, str]:
    """Encode a new envelope; return ``(task_id, json)``.

    ``max_retries`` None leaves the field out: the worker then applies the
    task's declared default (``@task(max_retries=...)``), else the runtime's
    (:data:`taskscale.options.OPTIONS`).
    Raises :class:`EnvelopeError` for a bad name, priority or argument that
    is not JSON, or a field against the rules of :mod:`taskscale.envelope_rules`
    (``reply_to`` a reply key of the namespace of ``prefix``, when given), and
    :class:`PayloadTooLarge` over ``max_bytes`` (0 = no limit).
    """
    check_name("task type", task_type)
    task_id = check_name("task id", task_id or new_task_id())
    if max_retries is not None and (
        isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
    ):
        raise EnvelopeError(f"max_retries must be an integer >= 0, not {max_retries!r}")
    doc: dict[str, Any] = {
        "id": task_id,
        "type": task_type,
        "args": list(args),
        "kwargs": dict(kwargs or {}),
        "priority": parse_priority(priority),
        "attempts": 0,
    }
    if max_retries is not None:
        doc["max_retries"] = max_retries
    if extra:
        doc.update(extra)
    why = problem(doc, prefix=prefix)
    if why is not None:
        raise EnvelopeError(f"task {task_type}/{task_id}: {why}")
    return task_id, encode(doc, max_bytes=max_bytes)


def encode(doc: Mapping[str, Any], *, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """Compact JSON of an envelope document, size-checked."""
    try:
        text = json.dumps(doc, separators=_COMPACT, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EnvelopeError(f"task {doc.get('id')}: arguments are not JSON: {exc}") from None
    size = len(text.encode("utf-8"))
    if max_bytes and size > max_bytes:
        raise PayloadTooLarge(
            f"task {doc.get('type')}/{doc.get('id')}: envelope is {size} bytes, "
            f"over the limit of {max_bytes} bytes"
        )
    return text


def decode(raw: str | bytes, *, prefix: str | None = None) -> Envelope:
    """Decode an envelope a worker claimed; raise :class:`EnvelopeError`
    (naming the field) when it breaks the rules of :mod:`taskscale.envelope_rules`
    (``reply_to``: a reply key of the namespace of ``prefix``, when given).
    Never raises anything else, whatever the bytes."""
    try:  # bytes decoded here: json.loads would first sniff their encoding
        doc = _DECODER.decode(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise EnvelopeError(f"envelope is not JSON: {str(exc)[:200]}") from None
    why = problem(doc, prefix=prefix, text=raw)
    if why is not None:
        raise EnvelopeError(f"invalid envelope: {why}")
    args, kwargs = doc.get("args"), doc.get("kwargs")
    return Envelope(
        id=doc["id"],
        type=doc["type"],
        args=args if type(args) is list else [],  # absent or {} (the rules allow it)
        kwargs=kwargs if type(kwargs) is dict else {},
        priority=_int(doc, "priority", DEFAULT_PRIORITY),
        attempts=_int(doc, "attempts", 0),
        enqueued_ms=_opt_int(doc, "enqueued_ms"),
        due_ms=_opt_int(doc, "due_ms"),
        reply_to=doc.get("reply_to"),
        fanout=doc.get("fanout"),
        reaped=_int(doc, "reaped", 0),
        fields=doc,
    )


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON, though Python's reader takes them: an
    envelope holding one anywhere (its arguments too) is refused."""
    raise ValueError(f"{name} is not a JSON number")


#: json.loads's own decoder but for NaN / Infinity (the same C scanner).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def for_retry(env: Envelope) -> str:
    """The envelope of the next attempt: ``attempts`` + 1, without ``due_ms``
    (the scheduler stamps the new due time when it promotes it)."""
    doc = {k: v for k, v in env.fields.items() if k != "due_ms"}
    doc["attempts"] = env.attempts + 1
    # ASCII: a lone surrogate Python's reader took (as "\\ud800") stays escaped
    return json.dumps(doc, separators=_COMPACT, allow_nan=False)


def _int(doc: Mapping[str, Any], name: str, default: int) -> int:
    """A field the rules checked: an int, or a float with an integral value."""
    value = doc.get(name, default)
    return value if type(value) is int else int(value)


def _opt_int(doc: Mapping[str, Any], name: str) -> int | None:
    value = doc.get(name)
    return value if value is None or type(value) is int else int(value)
