"""requeue.lua, promote.lua and reap.lua driven directly against a real
redis-server: tasks returned to their queue, due tasks made ready, a dead
worker's tasks reaped."""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.counters import active, stat
from support.scripts import W, claim, heartbeat, promote
from taskscale import envelope
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def test_requeue_returns_tasks_to_the_head_of_their_priority_list(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    first = producer.enqueue("a", priority=2)
    producer.enqueue("a", priority=2)
    claim(r, keys, 1, "a")
    moved = scripts_for(r).requeue(
        keys=[keys.active, keys.workers, keys.inflight(W), keys.worker(W)],
        args=[keys.prefix, W, "final"],
        client=r,
    )
    assert moved == 1
    assert json.loads(r.lindex(keys.queue("a", 2), 0) or b"{}")["id"] == first
    assert active(r, keys, "a") == 0 and stat(r, keys, "a", "requeued") == 1
    assert r.zscore(keys.workers, W) is None and not r.exists(keys.worker(W))


def test_promote_moves_only_due_tasks_to_the_tail_keeping_priority(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a", "ready", priority=3)
    due_id = producer.enqueue("a", "due", priority=3, delay=0.01)
    producer.enqueue("a", "later", delay=60)
    time.sleep(0.05)
    promoted, next_due, now, more, late = promote(r, keys)
    assert promoted == 1 and more == 0 and late >= 30  # due 10 ms in, promoted after 50
    assert 55_000 < next_due - now <= 60_000
    queue = [json.loads(x) for x in r.lrange(keys.queue("a", 3), 0, -1)]
    assert [t["args"][0] for t in queue] == ["ready", "due"]  # tail, not head
    assert queue[1]["id"] == due_id and queue[1]["due_ms"] <= now
    assert r.zcard(keys.delayed("a")) == 1


def test_reap_counts_each_return_in_the_envelope_without_reencoding_it(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a")  # args [] and kwargs {} must stay an array and an object
    for expected in (1, 2):
        heartbeat(r, keys, "w", lease_ms=60_000)
        claim(r, keys, 1, "a", worker="w")
        r.zadd(keys.workers, {"w": 1})  # the worker's heartbeat stopped
        scripts_for(r).reap(keys=[keys.active, keys.workers], args=[keys.prefix, 10], client=r)
        raw = r.lindex(keys.queue("a"), 0) or b"{}"
        doc = json.loads(raw)
        assert doc["reaped"] == expected
        assert doc["args"] == [] and doc["kwargs"] == {}
        assert envelope.decode(raw).reaped == expected


def test_reap_returns_tasks_of_expired_workers_only(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys, "dead-w", lease_ms=1)
    heartbeat(r, keys, "live-w", lease_ms=60_000)
    producer.enqueue_many("a", [(1,), (2,)])
    claim(r, keys, 1, "a", worker="live-w")
    r.zadd(keys.workers, {"dead-w": 10**13})  # lease valid while it claims
    [lost] = claim(r, keys, 1, "a", worker="dead-w")
    r.zadd(keys.workers, {"dead-w": 1})  # ... then its heartbeat stops
    reply = scripts_for(r).reap(keys=[keys.active, keys.workers], args=[keys.prefix, 10], client=r)
    assert [int(x) for x in reply] == [1, 1, 0]
    assert json.loads(r.lindex(keys.queue("a"), 0) or b"{}")["id"] == lost["id"]
    assert active(r, keys, "a") == 1
    assert r.zscore(keys.workers, "live-w") is not None
    assert not r.exists(keys.inflight("dead-w"))
