"""The Python producer checks an envelope by the same rules before sending
(taskscale/envelope_rules.py): what enqueue.lua would refuse never leaves the
process, and nothing reaches Redis."""

from __future__ import annotations

import math

import pytest
import redis

from taskscale.envelope import EnvelopeError
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def _deep(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda p: p.enqueue("t", extra={"reply_to": "{taskscale}:q:t:5"}), '"reply_to"'),
        (lambda p: p.enqueue("t", extra={"reply_to": "{other}:reply:x"}), '"reply_to"'),
        (lambda p: p.enqueue("t", extra={"timeout_ms": math.inf}), '"timeout_ms"'),
        (lambda p: p.enqueue("t", extra={"reply_ttl": 0}), '"reply_ttl"'),
        (lambda p: p.enqueue("t", extra={"fanout_collect": 1}), '"fanout_collect"'),
        (lambda p: p.enqueue("t", _deep(32)), '"args"'),  # args itself is a level
        (lambda p: p.enqueue("t", x=_deep(32)), '"kwargs"'),
        (lambda p: p.enqueue("t", math.nan), "not JSON"),
    ],
)
def test_the_producer_refuses_what_the_rules_refuse_naming_it(
    r: redis.Redis, keys: Keys, call: object, named: str
) -> None:
    with pytest.raises(EnvelopeError, match=named):
        call(Producer(r, keys=keys))  # type: ignore[operator]
    assert r.keys("*") == []


def test_what_the_rules_allow_goes_through(r: redis.Redis, keys: Keys) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue("t", _deep(31), extra={"reply_to": keys.reply("x1"), "x_new": {"a": 1}})
    assert r.llen(keys.queue("t")) == 1
