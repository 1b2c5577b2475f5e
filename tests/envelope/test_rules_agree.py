"""The envelope rules hold the same in Python and in enqueue.lua.

docs/schema.md states the rules once; ``taskscale/envelope_rules.py`` (the
producer and the worker) and ``scripts/lib/envelope_rules.lua`` (enqueue)
are two readings of them.  Hypothesis feeds both the same envelopes, valid
and broken (tests/support/envelopes.py): what one refuses the other refuses,
naming the same field, and nothing is written for a refused one.
"""

from __future__ import annotations

import re

import pytest
import redis
from hypothesis import HealthCheck, given, settings

from support.envelopes import FUZZ_TYPE, envelopes
from taskscale import envelope
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for

pytestmark = pytest.mark.integration


def _python_verdict(raw: bytes, keys: Keys) -> str | None:
    try:
        env = envelope.decode(raw, prefix=keys.prefix)
    except envelope.EnvelopeError as exc:
        return str(exc)
    return None if env.type == FUZZ_TYPE else f'"type" must be {FUZZ_TYPE}'


def _field(message: str) -> str | None:
    found = re.search(r'"(\w+)"', message)
    return found[1] if found else None


@settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=envelopes())
def test_enqueue_lua_and_the_python_rules_agree(r: redis.Redis, keys: Keys, raw: bytes) -> None:
    python = _python_verdict(raw, keys)
    try:
        scripts_for(r).enqueue(
            keys=[keys.types], args=[keys.prefix, FUZZ_TYPE, 0, 0, raw], client=r
        )
        lua = None
    except redis.ResponseError as exc:
        lua = str(exc)
    try:
        assert (python is None) == (lua is None), (raw[:300], python, lua)
        if lua is not None:
            assert lua.startswith("invalid envelope #1: ") and "\n" not in lua
            assert r.keys("*") == []  # nothing written
            if _field(python or "") and _field(lua):
                assert _field(python or "") == _field(lua), (raw[:300], python, lua)
    finally:
        r.flushdb()
