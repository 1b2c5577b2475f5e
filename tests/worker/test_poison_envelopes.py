"""Issue 21, items 1 and 2: an envelope the worker cannot run never kills a
slot, never touches a key it names, and is dead-lettered with the reason.

On the old code, ``"max_retries": 1e400`` (valid JSON that decodes to inf)
or NaN raised out of the decode, the fallback decoded again and raised
inside its ``except``: the slot's thread died, ACTIVE_TASKS stayed raised and
no later task of the worker ran.  A ``reply_to`` naming a ready queue made
the worker EXPIRE that queue.  Each case here runs a one-slot worker, so a
dead slot shows as the valid task after it never completing.
"""

from __future__ import annotations

import json

import pytest
import redis

from support.counters import active, stat
from support.waiting import wait_until
from support.workers import running_worker
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for

pytestmark = pytest.mark.integration

POISON = [
    pytest.param('"max_retries":1e400', "max_retries", id="max_retries-inf"),
    pytest.param('"max_retries":NaN', "not JSON", id="max_retries-nan"),
    pytest.param('"attempts":1e400', "attempts", id="attempts-inf"),
    pytest.param('"priority":-1e400', "priority", id="priority-minus-inf"),
    pytest.param('"reaped":Infinity', "not JSON", id="reaped-infinity"),
    # claim.lua summed now - enqueued_ms into wait_ms: -1e30 made HINCRBY fail,
    # the worker took it for fatal and stopped (found by the 10 000-envelope run)
    pytest.param('"enqueued_ms":-1e30', "enqueued_ms", id="enqueued-minus-1e30"),
    pytest.param('"due_ms":-1e400', "due_ms", id="due-minus-inf"),
    pytest.param('"timeout_ms":1e400', "timeout_ms", id="timeout-inf"),
    pytest.param('"args":{"a":1}', "args", id="args-object"),
    pytest.param('"kwargs":[1]', "kwargs", id="kwargs-array"),
    pytest.param('"reply_to":"{taskscale}:q:other:5"', "reply_to", id="reply_to-a-queue"),
    pytest.param('"reply_to":"{taskscale}:ACTIVE_TASKS"', "reply_to", id="reply_to-a-hash"),
    pytest.param('"reply_to":"{other}:reply:x"', "reply_to", id="reply_to-other-namespace"),
]


def _raw(task_id: str, field: str) -> str:
    return '{"id":"' + task_id + '","type":"echo","args":[],"kwargs":{},' + field + "}"


@pytest.mark.parametrize(("field", "named"), POISON)
def test_a_poison_envelope_is_refused_by_enqueue_naming_the_field(
    r: redis.Redis, keys: Keys, field: str, named: str
) -> None:
    enqueue = scripts_for(r).enqueue
    with pytest.raises(redis.ResponseError) as caught:
        enqueue(keys=[keys.types], args=[keys.prefix, "echo", 0, 0, _raw("p1", field)], client=r)
    assert "invalid envelope #1" in str(caught.value)
    if named != "not JSON":
        assert f'"{named}"' in str(caught.value)
    assert r.keys("*") == []  # nothing written


@pytest.mark.parametrize(("field", "named"), POISON)
def test_a_poison_envelope_pushed_raw_is_dead_lettered_and_the_slot_lives_on(
    r: redis.Redis, redis_url: str, keys: Keys, field: str, named: str
) -> None:
    queue = keys.queue("echo", 5)
    r.rpush(queue, "keep-me")  # a queue a reply_to may name: never expired
    r.lpop(queue)
    r.rpush(keys.queue("other", 5), "x")  # a bystander queue that must keep no TTL
    r.rpush(queue, _raw("p1", field))
    with running_worker(redis_url, ("echo",), threads=1):
        wait_until(lambda: stat(r, keys, "echo", "dead") == 1, timeout=15, what="dead letter")
        r.rpush(queue, json.dumps({"id": "v1", "type": "echo", "args": [1], "kwargs": {}}))
        wait_until(lambda: stat(r, keys, "echo", "completed") == 1, timeout=15, what="next task")
    [letter] = [json.loads(x) for x in r.lrange(keys.dead("echo"), 0, -1)]
    assert letter["error"].startswith("InvalidEnvelope: ")
    assert named in letter["error"]
    assert active(r, keys, "echo") == 0
    assert r.ttl(queue) == -2 or r.ttl(queue) == -1
    assert r.ttl(keys.queue("other", 5)) == -1  # never expired, never written
    assert r.lrange(keys.queue("other", 5), 0, -1) == [b"x"]
    assert r.type(keys.active) == b"hash" and r.ttl(keys.active) == -1
    assert r.keys("{other}:*") == []
