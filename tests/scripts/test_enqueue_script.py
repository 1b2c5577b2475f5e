"""enqueue.lua driven directly against a real redis-server: the envelope it
stores, the demand it announces, the wake tokens, delayed tasks, and the
batches it refuses whole."""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.counters import stat
from support.scripts import delayed_entries
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer, ProducerSettings

pytestmark = pytest.mark.integration


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
