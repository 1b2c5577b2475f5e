"""claim.lua checks the types of its ready lists only when a pop meets one of
the wrong type (issue 27: ten TYPE calls a type were a third of a claim's
commands).  Still nothing is written before the BADKEY reply, and a claim
whose later pop meets the key keeps what it took, consistently counted."""

from __future__ import annotations

import json

import pytest
import redis

from support.counters import active
from support.scripts import W, claim, heartbeat
from taskscale.key_types import wrong_key
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def _snapshot(r: redis.Redis) -> dict[bytes, tuple[bytes, int, bytes | None]]:
    return {k: (r.type(k), r.ttl(k), r.dump(k)) for k in r.keys("*")}


def test_a_wrong_typed_ready_list_met_first_is_named_and_nothing_is_written(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a")  # normal priority: after b's most urgent list in the pop's order
    heartbeat(r, keys)
    r.set(keys.queue("b", 0), "x")
    before = _snapshot(r)
    with pytest.raises(redis.ResponseError) as caught:
        claim(r, keys, 2, "a", "b")
    found = wrong_key(caught.value, keys)
    assert found is not None and found.key == keys.queue("b", 0) and found.task_type == "b"
    assert _snapshot(r) == before
    assert [t["type"] for t in claim(r, keys, 2, "a")] == ["a"]  # the other type goes on


def test_a_wrong_typed_ready_list_met_later_ends_the_claim_with_what_it_took(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a", "urgent", priority=0)
    producer.enqueue_many("a", [("n1",), ("n2",)])
    heartbeat(r, keys)
    r.set(keys.queue("b", 1), "x")  # after q:a:0 in the pop's order, before q:a:5
    got = claim(r, keys, 3, "a", "b")
    assert [t["args"] for t in got] == [["urgent"]]
    assert active(r, keys, "a") == 1
    assert r.hkeys(keys.inflight(W)) == [got[0]["id"].encode()]
    assert int(r.hget(keys.queued, "a") or 0) == 2 == r.llen(keys.queue("a"))
    # the next claim's first pop meets the key: named, nothing written
    before = _snapshot(r)
    with pytest.raises(redis.ResponseError) as caught:
        claim(r, keys, 3, "a", "b")
    found = wrong_key(caught.value, keys)
    assert found is not None and found.key == keys.queue("b", 1)
    assert _snapshot(r) == before
    assert [json.loads(e)["args"] for e in r.lrange(keys.queue("a"), 0, -1)] == [["n1"], ["n2"]]
