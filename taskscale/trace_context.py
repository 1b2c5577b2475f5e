"""The W3C trace context in a task envelope: checks and the worker's fast path.

Why a module of its own: these read the envelope's ``traceparent`` /
``tracestate`` / ``tracefirst`` fields (docs/schema.md) as text and dicts,
without OpenTelemetry, so that the worker can tell an unsampled task from
its raw bytes -- the cheapest test it can make per task, since with 1 %
sampling 99 % of the tasks take it (issue 24: within 3 % of tracing off).
:mod:`taskscale.tracing` builds the spans from what these find.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Envelope fields (docs/schema.md); longer or malformed values are ignored.
TRACEPARENT, TRACESTATE, TRACEFIRST = "traceparent", "tracestate", "tracefirst"
MAX_TRACEPARENT, MAX_TRACESTATE = 55, 512

#: A top-level ``traceparent`` whose flags say "not sampled" (last bit 0),
#: found without decoding the envelope: the worker's fast path (below).
#: The compact form (what every taskscale producer writes) is checked at a
#: fixed offset from ``bytes.find``; this pattern is the fallback for other
#: spacing or field order.
_UNSAMPLED = re.compile(rb'"traceparent"\s*:\s*"(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f][02468ace])"')
_COMPACT = b'"traceparent":"'
#: The value alone (55 bytes) and its last byte when not sampled.
_UNSAMPLED_VALUE = re.compile(rb"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f][02468ace]")
#: A valid ``traceparent`` value (:func:`valid_traceparent`).
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def unsampled_parent(raw: bytes) -> bytes | None:
    """The envelope's ``traceparent`` when it says "not sampled", else None
    (none, sampled or malformed), read from the raw text: no JSON decode."""
    at = raw.find(_COMPACT)
    if at >= 0:
        start = at + len(_COMPACT)
        end = start + MAX_TRACEPARENT
        if raw[end : end + 1] == b'"' and _UNSAMPLED_VALUE.fullmatch(raw, start, end):
            return raw[start:end]
        return None
    if b'"traceparent"' not in raw:
        return None
    found = _UNSAMPLED.search(raw)  # odd spacing: rare
    return None if found is None else found[1]


def valid_traceparent(value: object) -> bool:
    """A W3C ``traceparent`` as the envelope field allows: a string of at
    most 55 characters, version-traceid-spanid-flags in lower-case hex."""
    # 55 characters is exactly the four parts: nothing may follow them.
    return isinstance(value, str) and _TRACEPARENT.fullmatch(value) is not None


def carrier(doc: Mapping[str, Any], field: str = TRACEPARENT) -> dict[str, str]:
    """The W3C carrier of an envelope's trace fields; empty if malformed."""
    parent = doc.get(field)
    if not valid_traceparent(parent):
        return {}
    found = {TRACEPARENT: str(parent)}
    state = doc.get(TRACESTATE)
    if field == TRACEPARENT and isinstance(state, str) and len(state) <= MAX_TRACESTATE:
        found[TRACESTATE] = state
    return found
