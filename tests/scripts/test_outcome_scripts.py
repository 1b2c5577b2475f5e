"""complete.lua and fail.lua driven directly against a real redis-server: a
task's outcome recorded once, its counters, its RPC reply, its fan-out,
its retry or its dead letter."""

from __future__ import annotations

import json

import pytest
import redis

from support.counters import active, stat
from support.scripts import W, claim, complete, delayed_entries, fail, heartbeat
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def test_complete_decrements_sets_idle_since_and_counts_once(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("a", [(1,), (2,)])
    t1, t2 = claim(r, keys, 2, "a")
    now = float(r.time()[0])
    assert complete(r, keys, t1, t2) == 2
    assert complete(r, keys, t1) == 0  # already recorded: no double count
    assert active(r, keys, "a") == 0
    assert stat(r, keys, "a", "completed") == 2
    assert stat(r, keys, "a", "service_ms") == 14
    assert abs(float(r.hget(keys.idle_since, "a") or 0) - now) < 5
    assert r.hlen(keys.inflight(W)) == 0
    assert stat(r, keys, "a", "active_underflow") == 0


def test_complete_never_takes_active_below_zero_and_counts_the_clamp(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue("a")
    [task] = claim(r, keys, 1, "a")
    r.hset(keys.active, "a", 0)  # someone skewed the counter
    complete(r, keys, task)
    assert active(r, keys, "a") == 0
    assert stat(r, keys, "a", "active_underflow") == 1


def test_complete_pushes_the_rpc_reply_with_a_ttl(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    reply_key = keys.reply("t1")
    producer.enqueue("a", task_id="t1", extra={"reply_to": reply_key})
    [task] = claim(r, keys, 1, "a")
    complete(r, keys, task)
    assert r.lrange(reply_key, 0, -1) == [b'{"ok":true}']
    assert 0 < r.ttl(reply_key) <= 60


def test_complete_of_a_fanout_subtask_releases_the_next_and_notifies_at_the_end(
    r: redis.Redis, keys: Keys
) -> None:
    heartbeat(r, keys)
    f = "f1"
    r.hset(
        keys.fanout(f),
        mapping={
            "type": "a",
            "priority": 5,
            "total": 2,
            "limit": 1,
            "running": 1,
            "succeeded": 0,
            "failed": 0,
        },
    )
    first = json.dumps({"id": "s1", "type": "a", "fanout": f, "enqueued_ms": 1})
    r.rpush(keys.queue("a"), first)
    r.rpush(keys.fanout_pending(f), json.dumps({"id": "s2", "type": "a", "fanout": f}))
    [s1] = claim(r, keys, 1, "a")
    complete(r, keys, s1)
    assert r.hget(keys.fanout(f), "running") == b"1"
    [released] = [json.loads(x) for x in r.lrange(keys.queue("a"), 0, -1)]
    assert released["id"] == "s2" and released["enqueued_ms"] > 1
    [s2] = claim(r, keys, 1, "a")
    complete(r, keys, s2)
    notice = json.loads(r.lindex(keys.fanout_done(f), 0) or b"{}")
    assert notice == {"id": f, "total": 2, "succeeded": 2, "failed": 0}
    assert r.hget(keys.fanout(f), "running") == b"0"
    assert r.ttl(keys.fanout(f)) > 0


# --- fail --------------------------------------------------------------------------
def test_fail_with_retry_schedules_the_new_envelope_after_the_backoff(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue("a")
    [task] = claim(r, keys, 1, "a")
    retry_env = json.dumps({**task, "attempts": 1})
    now_ms = int(r.time()[0]) * 1000
    assert fail(r, keys, task, "retry", 5000, retry_env, "", 0, "", "") == 1
    [(raw, due)] = delayed_entries(r, keys.delayed("a"))
    assert json.loads(raw)["attempts"] == 1
    assert now_ms + 4000 <= due <= now_ms + 7000
    assert active(r, keys, "a") == 0
    assert stat(r, keys, "a", "failed") == 1 and stat(r, keys, "a", "retried") == 1
    assert fail(r, keys, task, "retry", 5000, retry_env, "", 0, "", "") == 0  # not in flight


def test_fail_dead_letters_with_the_error_and_replies(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue("a", task_id="t9", extra={"reply_to": keys.reply("t9")})
    [task] = claim(r, keys, 1, "a")
    err_reply = '{"id":"t9","ok":false,"error_type":"ValueError","error":"boom"}'
    fail(r, keys, task, "dead", 0, "ValueError: boom", keys.reply("t9"), 30, err_reply, "")
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("a"), 0, -1)]
    assert dead["error"] == "ValueError: boom" and json.loads(dead["envelope"])["id"] == "t9"
    assert r.lrange(keys.reply("t9"), 0, -1) == [err_reply.encode()]
    assert stat(r, keys, "a", "dead") == 1 and active(r, keys, "a") == 0
