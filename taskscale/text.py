"""Redis replies as text: the one bytes -> str conversion, and the one way a
reader shows what it decoded.

taskscale's clients never set ``decode_responses`` (task envelopes and claim
replies stay bytes on the hot path), so every module that reads a name, a
field or a status out of a reply turns it into ``str``.  Twelve modules kept
a private copy of that one line; this is the copy they share, so a reply
decodes the same way everywhere (UTF-8, strict unless the caller reads data
taskscale did not write).

A reader of envelopes and dead letters (``taskscale dead list``, ``taskscale
task``, ``delayed list``, the console's pages and API) must never fail on
bytes some producer wrote that are not UTF-8: one such envelope made every
dead letter of its type unreadable.  It decodes with
``errors="surrogateescape"`` (nothing lost: the JSON still parses) through
:func:`loads_lenient`, and passes what it shows through :func:`shown`, which
writes each undecodable byte as ``\\xNN`` (and a lone surrogate a JSON
``\\ud800`` escape made as ``\\ud800``), so the text can be printed, rendered
and encoded as JSON again.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["as_text", "loads_lenient", "shown"]

#: What :func:`shown` puts in place of a document nested too deeply to walk.
TOO_DEEP = "(nested too deeply to show)"


def as_text(value: object, *, errors: str = "strict") -> str:
    """``value`` as ``str``: bytes decoded as UTF-8 (``errors`` as in
    :meth:`bytes.decode`, e.g. ``"replace"`` for another library's keys,
    ``"surrogateescape"`` for data to parse and then show with :func:`shown`),
    anything else through ``str()`` (a ``str`` comes back as it is)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors)
    return str(value)


def loads_lenient(value: object) -> Any:
    """The JSON document in ``value`` (bytes or str), or None when it is not
    JSON, not UTF-8 JSON taskscale can parse, or nested deeper than Python
    can decode.  Undecodable bytes stay in its strings as surrogate escapes:
    pass what is shown through :func:`shown`.  Never raises."""
    try:
        return json.loads(as_text(value, errors="surrogateescape"))
    except (ValueError, RecursionError):
        return None


def shown(value: Any) -> Any:
    """``value`` safe to print, render or encode: in every ``str`` of it
    (dict keys too, lists and dicts walked) a byte that was not UTF-8 becomes
    ``\\xNN`` and any other lone surrogate ``\\uXXXX``; bytes are decoded
    first.  Never raises: a document too deep to walk is :data:`TOO_DEEP`."""
    try:
        return _shown(value)
    except RecursionError:
        return TOO_DEEP


def _shown(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return value if value.isascii() or _encodable(value) else _escaped(value)
    if isinstance(value, list):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {_shown(k): _shown(v) for k, v in value.items()}
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte surrogateescape kept: \xNN
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate from a JSON escape
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)
