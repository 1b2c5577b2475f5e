"""Issue 21, items 2 and 3: the scripts check key types before they write.

On the old code a reply_to naming a hash, or a wrong-typed IDLE_SINCE, made
complete.lua fail halfway and keep its earlier writes (the task gone from the
in-flight hash, ACTIVE_TASKS raised for good); a reply_to naming a ready
queue made it EXPIRE that queue.  Now a wrong-typed key is the error
``BADKEY <key> is a <found>, not a <wanted>`` and nothing is written, and a
reply key that is not ``{NS}:reply:<id>`` is never written.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from support.counters import active, stat
from support.scripts import claim, complete, fail, heartbeat, promote
from taskscale.cancellation import cancel
from taskscale.key_types import WrongKey, WrongKeys, wrong_key
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def _running(r: redis.Redis, keys: Keys, producer: Producer, **extra: Any) -> dict[str, Any]:
    producer.enqueue("a", extra=extra or None)
    heartbeat(r, keys)
    [task] = claim(r, keys, 1, "a")
    assert active(r, keys, "a") == 1
    return task


def _snapshot(r: redis.Redis) -> dict[bytes, tuple[bytes, int, bytes | None]]:
    return {k: (r.type(k), r.ttl(k), r.dump(k)) for k in r.keys("*")}


@pytest.mark.parametrize(
    ("key", "wanted"),
    [("idle_since", "hash"), ("active", "hash"), ("stats_a", "hash"), ("reply", "list")],
)
def test_complete_with_a_wrong_typed_key_writes_nothing_and_names_it(
    r: redis.Redis, keys: Keys, producer: Producer, key: str, wanted: str
) -> None:
    task = _running(r, keys, producer)
    name = {
        "idle_since": keys.idle_since,
        "active": keys.active,
        "stats_a": keys.stats("a"),
        "reply": keys.reply("x1"),
    }[key]
    r.delete(name)
    r.set(name, "a string")
    task["reply_to"] = keys.reply("x1")
    before = _snapshot(r)
    with pytest.raises(redis.ResponseError) as caught:
        complete(r, keys, task)
    found = wrong_key(caught.value, keys)
    assert found is not None and (found.key, found.found, found.wanted) == (name, "string", wanted)
    assert _snapshot(r) == before  # nothing half done
    r.delete(name)
    assert complete(r, keys, task) == 1  # fixed: recorded once
    assert active(r, keys, "a") == 0 and stat(r, keys, "a", "completed") == 1


def test_fail_with_a_wrong_typed_dead_list_writes_nothing(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    task = _running(r, keys, producer)
    r.set(keys.dead("a"), "a string")
    before = _snapshot(r)
    with pytest.raises(redis.ResponseError, match="BADKEY"):
        fail(r, keys, task, "dead", 0, "boom", "", 0, "", "")
    assert _snapshot(r) == before


@pytest.mark.parametrize(
    "reply_to",
    ["{taskscale}:q:a:5", "{taskscale}:ACTIVE_TASKS", "{other}:reply:x", "foreign", "{taskscale}:"],
)
def test_a_reply_key_that_is_not_one_is_never_written(
    r: redis.Redis, keys: Keys, producer: Producer, reply_to: str
) -> None:
    task = _running(r, keys, producer)
    r.rpush(keys.queue("a", 5), "bystander")
    task["reply_to"] = reply_to
    assert complete(r, keys, task) == 1
    assert r.ttl(keys.queue("a", 5)) == -1  # never expired
    assert r.type(reply_to) in (b"none", b"list", b"hash")
    assert r.ttl(reply_to) in (-1, -2)
    assert active(r, keys, "a") == 0


def test_claim_with_a_wrong_typed_key_of_one_type_names_it_and_claims_nothing(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a")
    producer.enqueue("b")
    heartbeat(r, keys)
    r.set(keys.stats("b"), "x")
    before = _snapshot(r)
    with pytest.raises(redis.ResponseError) as caught:
        claim(r, keys, 2, "a", "b")
    found = wrong_key(caught.value, keys)
    assert found is not None and found.task_type == "b"
    assert _snapshot(r) == before
    assert [t["type"] for t in claim(r, keys, 2, "a")] == ["a"]  # the other type goes on


def test_promote_skips_only_the_type_whose_key_is_wrong(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a", delay=0.001)
    producer.enqueue("b", delay=0.001)
    r.set(keys.wake("b"), "x")
    time.sleep(0.05)
    reply = scripts_for(r).promote(keys=[keys.types], args=[keys.prefix, 1000], client=r)
    assert reply[0] == 1  # a's task promoted, b's left delayed
    assert [wrong_key(redis.ResponseError(e.decode()), keys) for e in reply[5]] == [
        WrongKey(keys.wake("b"), "string", "list", "b")
    ]
    assert r.llen(keys.queue("a")) == 1 and r.zcard(keys.delayed("b")) == 1
    r.delete(keys.wake("b"))
    assert promote(r, keys)[0] == 1  # fixed: b's too


def test_wrong_keys_holds_back_the_type_logs_once_and_counts_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = Keys("taskscale")
    counted: list[str] = []
    now = [100.0]
    wrong = WrongKeys(keys, who="w", hold_s=5, count=counted.append, clock=lambda: now[0])
    error = redis.ResponseError("BADKEY {taskscale}:q:b:5 is a string, not a list")
    assert wrong.seen(error) is not None and wrong.seen(error) is not None
    assert counted == ["{taskscale}:q:b:5"] * 2
    assert [r.getMessage().count("{taskscale}:q:b:5") for r in caplog.records] == [1]
    assert wrong.held(["a", "b"]) == {"b"}
    now[0] += 6
    assert wrong.held(["a", "b"]) == set()  # checked again by the next call
    wrong.seen(redis.ResponseError("BADKEY {taskscale}:ACTIVE_TASKS is a string, not a hash"))
    assert wrong.held(["a", "b"]) == {"a", "b"}
    assert wrong.seen(redis.ResponseError("WRONGTYPE something else")) is None


def test_cancel_answers_only_a_reply_key_and_checks_before_it_removes(
    r: redis.Redis, keys: Keys
) -> None:
    r.rpush(keys.queue("other", 5), "x")
    for task_id, reply_to in [("c1", keys.queue("other", 5)), ("c2", keys.reply("hashy"))]:
        env = {"id": task_id, "type": "a", "args": [], "kwargs": {}, "reply_to": reply_to}
        r.rpush(keys.queue("a", 5), json.dumps(env))
    r.hset(keys.reply("hashy"), "k", "v")
    assert cancel("c1", client=r, task_type="a", keys=keys).state == "queued"
    assert r.lrange(keys.queue("other", 5), 0, -1) == [b"x"]  # not a reply key: untouched
    assert r.ttl(keys.queue("other", 5)) == -1
    before = _snapshot(r)
    with pytest.raises(redis.ResponseError, match="BADKEY"):
        cancel("c2", client=r, task_type="a", keys=keys)
    assert _snapshot(r) == before  # not removed, nothing counted
