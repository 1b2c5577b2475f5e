"""Issue 21 item 6: a key of the wrong type is a warning in `taskscale status`
(and so on the console's overview, which reads the same status), naming the
key, and the status shows everything else instead of failing."""

from __future__ import annotations

import pytest
import redis

from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.status import collect, render

pytestmark = pytest.mark.integration


def test_wrong_typed_keys_are_warnings_and_the_rest_is_shown(r: redis.Redis, keys: Keys) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue("good")
    producer.enqueue("bad")
    r.delete(keys.stats("bad"), keys.idle_since)
    r.set(keys.stats("bad"), "x")
    r.set(keys.idle_since, "x")
    r.sadd(keys.queue("bad", 0), "a set")
    status = collect(r, keys)
    assert status["types"]["good"]["queued"] == 1  # the rest is read
    assert status["wrong_type_keys"] == {
        keys.idle_since: "string where taskscale keeps a hash",
        keys.queue("bad", 0): "set where taskscale keeps a list",
        keys.stats("bad"): "string where taskscale keeps a hash",
    }
    text = render(status)
    for key in status["wrong_type_keys"]:
        assert f"WARNING: key {key} is a " in text
