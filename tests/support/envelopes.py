"""Envelopes for the property tests (hypothesis): valid ones a worker runs
quickly, and malformed ones of every kind issue 21 names -- wrong types in
every field, inf/NaN, huge numbers, deep nesting, non-UTF-8 bytes, unknown
fields, keys outside the namespace, reply keys of other types, text that is
not a JSON object.  Each case is the raw bytes as they go to Redis.

Valid envelopes keep retries few and backoffs short (a run ends in seconds);
``{"fail": true}`` in kwargs makes the fuzz task raise (tests/envelope/fuzz_tasks.py).
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

from hypothesis import strategies as st

from taskscale.envelope_rules import RULES

PREFIX = "{taskscale}:"
#: The fuzz task type (tests/envelope/fuzz_tasks.py).
FUZZ_TYPE = "fz"
#: Reply keys the setup creates with another type than a list.
WRONG_TYPED_REPLIES = {PREFIX + "reply:hashy": "hash", PREFIX + "reply:stringy": "string"}

_NAME = st.text(alphabet=string.ascii_letters + string.digits + "_.-", min_size=1, max_size=24)
_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
#: A token written as it is into the JSON text (not valid JSON, or not a finite number).
_RAW = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "0x10", "01", "+1", "1."]
_BAD_VALUES: list[Any] = ["x", "", [], {}, [1], {"a": 1}, True, None, -1, 1.5, 2**60, 10**30]


def _raw(token: str) -> str:
    return f"@@RAW{token}@@"


@st.composite
def valid_doc(draw: st.DrawFn, task_type: str = FUZZ_TYPE) -> dict[str, Any]:
    """A valid envelope a fuzz worker runs in milliseconds (it may fail and retry)."""
    doc: dict[str, Any] = {
        "id": draw(_NAME),
        "type": task_type,
        "args": draw(st.lists(_VALUE, max_size=3)),
        "kwargs": draw(st.dictionaries(st.text(max_size=4), _VALUE, max_size=3)),
    }
    if draw(st.booleans()):
        doc["kwargs"]["fail"] = True
    optional = {
        "priority": st.integers(0, 9),
        "attempts": st.integers(0, 2),
        "max_retries": st.integers(0, 2),
        "retry_backoff_ms": st.integers(1, 20)
        | st.lists(st.integers(0, 20), min_size=1, max_size=3),
        "retry_backoff_max_ms": st.integers(1, 50),
        "timeout_ms": st.integers(2000, 5000),
        "reply_to": _NAME.map(lambda n: PREFIX + "reply:" + n),
        "reply_ttl": st.integers(1, 60),
        "reaped": st.integers(0, 2),
        "x_unknown": _VALUE,
    }
    for name, values in optional.items():
        if draw(st.booleans()):
            doc[name] = draw(values)
    if doc.get("reply_to") in WRONG_TYPED_REPLIES:
        del doc["reply_to"]
    return doc


def render(doc: Any) -> bytes:
    """The envelope's bytes: JSON, with the raw tokens and bad bytes put in."""
    text = json.dumps(doc, separators=(",", ":"))
    for token in _RAW:
        text = text.replace(json.dumps(_raw(token)), token)
    text = re.sub(r'"@@DEEP(\d+)@@"', lambda m: "[" * int(m[1]) + "1" + "]" * int(m[1]), text)
    return text.encode().replace(b"@@BADUTF8@@", b"\xff\xc3(")


@st.composite
def malformed(draw: st.DrawFn) -> bytes:
    """One envelope broken in one way (sometimes a way that is still valid)."""
    doc = draw(valid_doc())
    kind = draw(
        st.sampled_from(
            ["field", "raw", "missing", "deep", "utf8", "reply", "not-object", "other-type"]
        )
    )
    fields = [*RULES, "reply_to"]
    if kind == "field":
        doc[draw(st.sampled_from(fields))] = draw(st.sampled_from(_BAD_VALUES))
    elif kind == "raw":
        where = draw(st.sampled_from([*fields, "args"]))
        token = _raw(draw(st.sampled_from(_RAW)))
        doc[where] = [token] if where == "args" else token
    elif kind == "missing":
        doc.pop(draw(st.sampled_from(["id", "type"])))
    elif kind == "deep":
        depth = draw(st.sampled_from([33, 40, 200, 3000]))
        doc[draw(st.sampled_from(["args", "kwargs"]))] = f"@@DEEP{depth}@@"
    elif kind == "utf8":
        doc["args"] = ["a@@BADUTF8@@b"]
    elif kind == "reply":
        doc["reply_to"] = draw(
            st.sampled_from(
                [
                    *WRONG_TYPED_REPLIES,
                    PREFIX + "q:" + FUZZ_TYPE + ":5",
                    PREFIX + "ACTIVE_TASKS",
                    PREFIX + "stats:" + FUZZ_TYPE,
                    "{other}:reply:x",
                    "foreign:string",
                    PREFIX + "reply:",
                    PREFIX + "reply:a:b",
                ]
            )
        )
    elif kind == "not-object":
        return draw(st.sampled_from([b"[1,2]", b"42", b'"text"', b"{", b"", b"null", b"\xff\xfe"]))
    else:
        doc["type"] = "other"
    return render(doc)


#: Any case: mostly valid, or broken.
def envelopes() -> st.SearchStrategy[bytes]:
    return st.one_of(valid_doc().map(render), malformed())
