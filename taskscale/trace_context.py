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
#: found without decoding the envelope: the worker's fast path
#: (:func:`unsampled_parent`), as a pattern for the rare other spacing.
_UNSAMPLED = re.compile(rb'"traceparent"\s*:\s*"(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f][02468ace])"')
#: What every taskscale producer writes (compact JSON): 15 characters, the
#: 55 of the value (dashes at 2, 35 and 52; flags last), the closing quote.
_COMPACT = b'"traceparent":"'
#: The flags' last hex digit when the "sampled" bit is 0.
_UNSAMPLED_LAST = frozenset(b"02468ace")
#: A valid ``traceparent`` value (:func:`valid_traceparent`).
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def unsampled_parent(raw: bytes) -> bytes | None:
    """The envelope's ``traceparent`` when it says "not sampled", else None
    (none, sampled, or not shaped as one), read from the raw text: no JSON
    decode, no pattern for the compact form -- one ``bytes.find``, then the
    closing quote, the version, the dashes and the flags' last digit at
    their fixed offsets (a third of a regex search's cost, warm).  The hex
    of the ids is not checked here: a value that has the shape but not the
    digits skips the task's spans, and what the task sends starts a trace
    (the carried value is checked when used)."""
    at = raw.find(_COMPACT)
    if at < 0:
        if b'"traceparent"' not in raw:
            return None
        found = _UNSAMPLED.search(raw)  # other spacing: rare
        return None if found is None else found[1]
    end = at + 70  # offsets from at: literals, the cheapest in the per-task path
    if (
        len(raw) > end
        and raw[end] == 34  # "
        and raw[end - 1] in _UNSAMPLED_LAST
        and raw[at + 17] == raw[at + 50] == raw[at + 67] == 45  # -
        and raw[at + 15] == raw[at + 16] == 48  # version 00
    ):
        return raw[at + 15 : end]
    return None


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
