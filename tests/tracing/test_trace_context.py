"""The worker's fast path reads an unsampled ``traceparent`` from the raw
envelope (taskscale/trace_context.py): the compact form at a fixed offset
after one ``bytes.find``, other spacing by pattern; anything sampled or
malformed is left to the full decode (issue 24, 1 % within 3 % of off)."""

from __future__ import annotations

import json

import pytest

from taskscale.trace_context import unsampled_parent

TRACE = "0af7651916cd43dd8448eb211c80319c"
UNSAMPLED = f"00-{TRACE}-b7ad6b7169203331-00"


def envelope(**fields: object) -> bytes:
    doc = {"id": "a" * 32, "type": "noop", "args": [], "kwargs": {}, **fields}
    return json.dumps(doc, separators=(",", ":")).encode()


@pytest.mark.parametrize("flags", ["00", "02", "fe", "8a"])
def test_an_unsampled_traceparent_is_found_in_the_raw_text(flags: str) -> None:
    value = UNSAMPLED[:-2] + flags
    assert unsampled_parent(envelope(traceparent=value, tracestate="a=b")) == value.encode()


def test_other_spacing_is_found_by_the_fallback_pattern() -> None:
    spaced = json.dumps({"id": "x", "traceparent": UNSAMPLED}).encode()  # ": " spacing
    assert b'"traceparent": "' in spaced
    assert unsampled_parent(spaced) == UNSAMPLED.encode()


@pytest.mark.parametrize(
    "value",
    [
        UNSAMPLED[:-2] + "01",  # sampled
        UNSAMPLED[:-2] + "03",
        UNSAMPLED[:-2] + "ff",
        UNSAMPLED + "0",  # 56 characters
        UNSAMPLED[:-1],  # 54
        "01" + UNSAMPLED[2:],  # a version the fast path does not know
        UNSAMPLED.replace("-", "_", 1),
        UNSAMPLED[:35] + "_" + UNSAMPLED[36:],
        UNSAMPLED[:52] + "_" + UNSAMPLED[53:],
        "0" + UNSAMPLED[:-1],  # the dashes one off
        "",
        42,
        None,
    ],
)
def test_a_sampled_or_malformed_traceparent_is_left_to_the_decode(value: object) -> None:
    assert unsampled_parent(envelope(traceparent=value)) is None
    spaced = json.dumps({"id": "x", "traceparent": value}).encode()
    assert unsampled_parent(spaced) is None


@pytest.mark.parametrize("value", [UNSAMPLED.upper(), UNSAMPLED.replace("0af7", "0ag7")])
def test_the_fast_path_checks_the_shape_not_the_hex_digits(value: str) -> None:
    """The ids' digits are checked where the carried value is used (what the
    task sends then starts a trace: test_worker_trace_paths.py)."""
    assert unsampled_parent(envelope(traceparent=value)) == value.encode()
    assert unsampled_parent(json.dumps({"traceparent": value}).encode()) is None  # the pattern's


def test_no_traceparent_is_no_parent() -> None:
    assert unsampled_parent(envelope()) is None
    assert unsampled_parent(envelope(tracefirst=UNSAMPLED)) is None
    assert unsampled_parent(b"") is None
    assert unsampled_parent(b'"traceparent":"') is None  # cut short
