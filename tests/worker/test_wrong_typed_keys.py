"""Issue 21, items 3 and 6: one wrong-typed key stops nothing but what it concerns.

On the old code a string where a hash belongs stopped every worker and
scheduler (exit 1: a fleet under Kubernetes crash-looped), even for types
the key had nothing to do with, and a reply key of another type left a
completion half done.  Now the worker and the scheduler report the key (a
log line naming it, a counter) and go on serving every other type; the
key's own type resumes once it is fixed.
"""

from __future__ import annotations

import json

import pytest
import redis

from support.counters import active, stat
from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.keys import Keys
from taskscale.metrics import WorkerMetrics
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def test_a_wrong_typed_key_of_one_type_holds_back_that_type_only(
    r: redis.Redis, redis_url: str, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue("noop")
    r.delete(keys.stats("noop"))
    r.set(keys.stats("noop"), "not a hash")  # enqueue would refuse now: set after
    metrics = WorkerMetrics(types=("echo", "noop"), threads=2)
    with running_worker(redis_url, ("echo", "noop"), metrics=metrics):
        for i in range(5):
            producer.enqueue("echo", i)
        wait_until(lambda: stat(r, keys, "echo", "completed") == 5, timeout=20, what="echo")
        assert r.llen(keys.queue("noop")) == 1  # held back, not lost, not dead
        r.delete(keys.stats("noop"))
        wait_until(lambda: stat(r, keys, "noop", "completed") == 1, timeout=20, what="noop")
    assert active(r, keys, "echo") == 0 and active(r, keys, "noop") == 0
    lines = [rec.getMessage() for rec in caplog.records if keys.stats("noop") in rec.getMessage()]
    assert lines and "is a string where taskscale keeps a hash" in lines[0]
    value = metrics.registry.get_sample_value(
        "taskscale_worker_wrong_type_keys_total", {"key": keys.stats("noop")}
    )
    assert value is not None and value >= 1


def test_a_reply_key_of_another_type_loses_only_that_reply(
    r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    producer = Producer(r, keys=keys)
    reply = keys.reply("r1")
    r.hset(reply, "a", "b")
    producer.enqueue("echo", 1, extra={"reply_to": reply})
    producer.enqueue("echo", 2, extra={"reply_to": keys.reply("r2")})
    with running_worker(redis_url, ("echo",), threads=1):
        wait_until(lambda: stat(r, keys, "echo", "completed") == 2, timeout=20, what="both")
    assert active(r, keys, "echo") == 0
    assert r.hgetall(reply) == {b"a": b"b"} and r.ttl(reply) == -1  # untouched
    [answer] = r.lrange(keys.reply("r2"), 0, -1)
    assert json.loads(answer)["ok"] is True


def test_the_scheduler_goes_on_promoting_other_types(
    r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue("b", delay=0.01)
    r.set(keys.queue("b", 5), "not a list")
    with running_scheduler(redis_url, max_sleep_s=0.1) as scheduler:
        producer.enqueue("a", delay=0.01)
        wait_until(lambda: r.llen(keys.queue("a")) == 1, timeout=10, what="a promoted")
        assert r.zcard(keys.delayed("b")) == 1
        r.delete(keys.queue("b", 5))
        wait_until(lambda: r.llen(keys.queue("b")) == 1, timeout=10, what="b promoted")
        assert scheduler.promoted == 2
