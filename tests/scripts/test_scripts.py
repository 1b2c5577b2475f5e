"""Each Lua script's behaviour, driven directly against a real redis-server."""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.counters import active, stat
from support.scripts import (
    W,
    claim,
    complete,
    delayed_entries,
    fail,
    heartbeat,
    promote,
)
from taskscale import envelope
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer, ProducerSettings

pytestmark = pytest.mark.integration


# --- enqueue -----------------------------------------------------------------------
def test_enqueue_pushes_an_envelope_stamped_with_the_redis_clock(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    before_ms = int(r.time()[0]) * 1000
    task_id = producer.enqueue("email", "a@b.c", subject="hi")
    [raw] = r.lrange(keys.queue("email", 5), 0, -1)
    env = json.loads(raw)
    assert env["id"] == task_id and env["type"] == "email"
    assert env["args"] == ["a@b.c"] and env["kwargs"] == {"subject": "hi"}
    assert env["enqueued_ms"] >= before_ms
    assert r.smembers(keys.types) == {b"email"}
    assert stat(r, keys, "email", "enqueued") == 1
    assert r.llen(keys.wake("email")) == 1


def test_enqueue_publishes_demand_only_when_the_queue_was_empty(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    pubsub = r.pubsub()  # type: ignore[no-untyped-call]
    pubsub.subscribe(keys.demand_channel)
    first = pubsub.get_message(timeout=1)
    assert first is not None and first["type"] == "subscribe"
    producer.enqueue("email")
    producer.enqueue("email")
    messages = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        m = pubsub.get_message(timeout=0.1)
        if m:
            messages.append(m["data"])
    pubsub.close()
    assert messages == [b"email"]


def test_wake_tokens_are_capped(r: redis.Redis, keys: Keys, producer: Producer) -> None:
    producer.enqueue_many("email", [()] * 200)
    assert r.llen(keys.wake("email")) == 64
    assert r.llen(keys.queue("email")) == 200


def test_oversize_envelope_is_refused_before_redis(r: redis.Redis, keys: Keys) -> None:
    small = Producer(r, keys=keys, settings=ProducerSettings(max_payload_bytes=200))
    with pytest.raises(ValueError, match="over the limit of 200 bytes"):
        small.enqueue("email", "x" * 300)
    assert r.llen(keys.queue("email")) == 0


def test_enqueue_script_rejects_a_whole_batch_with_one_bad_envelope(
    r: redis.Redis, keys: Keys
) -> None:
    good = json.dumps({"id": "a1", "type": "email"})
    wrong_type = json.dumps({"id": "a2", "type": "sms"})
    with pytest.raises(redis.ResponseError, match="invalid envelope #2"):
        scripts_for(r).enqueue(
            keys=[keys.types], args=[keys.prefix, "email", 0, 0, good, wrong_type], client=r
        )
    with pytest.raises(redis.ResponseError, match="not a JSON object"):
        scripts_for(r).enqueue(keys=[keys.types], args=[keys.prefix, "email", 0, 0, "{x"], client=r)
    with pytest.raises(redis.ResponseError, match="over the limit"):
        scripts_for(r).enqueue(
            keys=[keys.types], args=[keys.prefix, "email", 0, 10, good], client=r
        )
    assert r.llen(keys.queue("email")) == 0 and not r.exists(keys.types)


def test_delayed_enqueue_goes_to_the_zset_due_later_and_wakes_the_scheduler(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    now_ms = int(r.time()[0]) * 1000
    producer.enqueue("email", delay=60)
    [(_raw, due)] = delayed_entries(r, keys.delayed("email"))
    assert now_ms + 59_000 <= due <= now_ms + 62_000
    assert r.llen(keys.queue("email")) == 0
    assert r.llen(keys.scheduler_wake) == 1
    producer.enqueue("email", delay=120)  # later than the earliest: no wake needed
    assert r.llen(keys.scheduler_wake) == 1
    producer.enqueue("email", delay=1)  # earlier: wake
    assert r.llen(keys.scheduler_wake) == 2


# --- claim -------------------------------------------------------------------------
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


# --- complete ----------------------------------------------------------------------
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


# --- requeue, promote, reap --------------------------------------------------------
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


def test_every_script_is_sent_to_redis_self_contained() -> None:
    from pathlib import Path

    from taskscale.luascripts import SCRIPT_NAMES, script_source

    every = sorted(
        p.stem for p in (Path(__file__).resolve().parents[2] / "taskscale/scripts").glob("*.lua")
    )
    assert {*SCRIPT_NAMES, "fanout_submit", "observe", "cancel"} <= set(every)
    for name in every:
        text = script_source(name)
        assert "--! include" not in text, name
    # shared logic is inlined into every script that needs it
    assert "local function fanout_final" in script_source("complete")
    assert "local function fanout_final" in script_source("fail")
    assert "local function back_to_head" in script_source("reap")
    assert "local function back_to_head" in script_source("requeue")
    assert "local function dead_push" in script_source("fail")
    assert "local function dead_push" in script_source("claim")
