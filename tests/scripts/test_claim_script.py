"""claim.lua driven directly against a real redis-server: urgency order, at
most k, the lease it requires, wake tokens, undecodable envelopes and the
queue wait it measures."""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.counters import active, stat
from support.scripts import W, claim, heartbeat
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def test_claim_takes_most_urgent_first_and_fifo_within_a_level(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue("a", "low1", priority="low")
    producer.enqueue("a", "n1")
    producer.enqueue("b", "high1", priority=0)
    producer.enqueue("a", "n2")
    producer.enqueue("a", "high2", priority="high")
    got = claim(r, keys, 10, "a", "b")
    assert [t["args"][0] for t in got] == ["high2", "high1", "n1", "n2", "low1"]


def test_claim_takes_at_most_k_and_records_lease_and_active(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("a", [(i,) for i in range(5)])
    got = claim(r, keys, 3, "a")
    assert len(got) == 3
    assert active(r, keys, "a") == 3
    assert set(r.hkeys(keys.inflight(W))) == {t["id"].encode() for t in got}
    assert r.llen(keys.queue("a")) == 2
    assert stat(r, keys, "a", "claimed") == 3


def test_claim_pushes_a_wake_token_when_work_remains(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("a", [(1,), (2,)])
    r.delete(keys.wake("a"))
    claim(r, keys, 1, "a")
    assert r.llen(keys.wake("a")) == 1  # one left: wake another worker
    claim(r, keys, 1, "a")
    assert r.llen(keys.wake("a")) == 1  # none left: no new token


def test_claim_refuses_a_worker_without_a_live_lease(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a")
    reply = scripts_for(r).claim(
        keys=[keys.active, keys.workers, keys.inflight(W)],
        args=[keys.prefix, W, 1, 0, "a"],
        client=r,
    )
    assert reply[0] == b"unregistered"
    assert r.llen(keys.queue("a")) == 1 and active(r, keys, "a") == 0


def test_claim_dead_letters_undecodable_envelopes_and_keeps_claiming(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    r.rpush(keys.queue("a"), b"not json", json.dumps({"id": "x", "type": "other"}))
    good = producer.enqueue("a")
    got = claim(r, keys, 1, "a")
    assert [t["id"] for t in got] == [good]
    dead = [json.loads(d) for d in r.lrange(keys.dead("a"), 0, -1)]
    assert dead[0]["envelope"] == "not json"
    assert "not a JSON object" in dead[0]["error"]
    assert "does not match" in dead[1]["error"]
    assert stat(r, keys, "a", "dead") == 2 and active(r, keys, "a") == 1


def test_claim_dead_letters_under_the_cap_and_counts_what_it_drops(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    r.rpush(keys.dead("a"), json.dumps({"envelope": "{}", "error": "older", "failed_ms": 1}))
    r.rpush(keys.queue("a"), b"bad 1", b"bad 2", b"bad 3")
    good = producer.enqueue("a")
    got = claim(r, keys, 1, "a", dead_cap=2)
    assert [t["id"] for t in got] == [good]
    kept = [json.loads(d)["envelope"] for d in r.lrange(keys.dead("a"), 0, -1)]
    assert kept == ["bad 2", "bad 3"]  # the newest two, as fail.lua keeps them
    assert stat(r, keys, "a", "dead") == 3 and stat(r, keys, "a", "dead_dropped") == 2


def test_claim_measures_queue_wait_on_the_redis_clock(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue("a")
    time.sleep(0.05)
    claim(r, keys, 1, "a")
    assert stat(r, keys, "a", "wait_ms") >= 40
