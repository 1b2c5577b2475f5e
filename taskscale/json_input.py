"""JSON typed by a person: the one parser of every JSON input, with its limits.

``taskscale enqueue --args/--kwargs``, ``taskscale schedules add --args``
(every JSON argument of the command line: ``cli.common.json_arg``) and the
console's API bodies (enqueue, call, the admin operations) parse JSON a user
typed.  Python's own parser meets a document nested a few thousand levels
deep with a RecursionError (a traceback on the command line, a 500 on the
console), and parses any size it is given; so every such input goes through
:func:`parse_json`, which checks the size and the nesting *before* parsing
(no recursion involved: a scan of the brackets) and answers a mistake with
one line, a :class:`JsonInputError` (a ``ValueError``: exit 2 on the command
line, HTTP 400 on the console).  NaN and Infinity, which JSON does not have,
are refused here too.

The limits are stated once, here: :data:`MAX_JSON_DEPTH` and
:data:`MAX_JSON_BYTES`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from taskscale.keys import DEFAULT_MAX_PAYLOAD_BYTES
from taskscale.text import as_text

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "JsonInputError", "json_depth", "parse_json"]

#: The deepest nesting of arrays and objects accepted (``[[1]]`` is 2 deep):
#: far beyond what task arguments need, far below what breaks a parser.
MAX_JSON_DEPTH = 64
#: The largest JSON input accepted, bytes: what one envelope may carry by
#: default (a larger argument could not be enqueued anyway).
MAX_JSON_BYTES = DEFAULT_MAX_PAYLOAD_BYTES

#: A JSON string (skipped whole: brackets inside it don't nest) or a bracket.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class JsonInputError(ValueError):
    """JSON input refused: not JSON, too large or nested too deeply (one line)."""


def json_depth(text: str, *, stop_over: int | None = None) -> int:
    """The deepest nesting of arrays and objects in ``text`` (0 for a scalar),
    found without parsing it (so without recursion); the scan ends as soon
    as the depth passes ``stop_over``."""
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if stop_over is not None and depth > stop_over:
                break
        elif token in "]}":
            depth -= 1
    return deepest


def parse_json(
    text: str | bytes,
    what: str,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The JSON document in ``text``; :class:`JsonInputError` naming ``what``
    (``--args``, "the body") when it is over ``max_bytes``, nested deeper
    than ``max_depth``, not JSON, or holds NaN / Infinity / a number too
    large for a float."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JsonInputError(f"{what} is {size} bytes, over the limit of {max_bytes} bytes")
    try:
        decoded = as_text(text)
    except UnicodeDecodeError:
        raise JsonInputError(f"{what} is not UTF-8 text") from None
    if json_depth(decoded, stop_over=max_depth) > max_depth:
        raise JsonInputError(f"{what} is nested more than {max_depth} deep (the limit)")
    try:
        return json.loads(decoded, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        raise JsonInputError(f"{what} is not valid JSON: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a JSON number")
    return value
