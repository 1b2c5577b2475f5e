"""QUEUED (docs/schema.md, "The ready count"): every script that pushes to or
takes from a ready list keeps the type's count equal to the lists' length,
in the same call; a plain push that does not count is fixed by the
scheduler's recount, which counts each fix."""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.counters import queued_and_lengths, stat
from support.scripts import W, claim, complete, fail, heartbeat, promote
from taskscale import admin
from taskscale.cancellation import cancel
from taskscale.fanout import submit_fanout
from taskscale.fanout_stream import open_fanout
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Call, Producer
from taskscale.scheduling.scheduler import Scheduler

T = "qc"


def exact(r: redis.Redis, keys: Keys, expected: int, task_type: str = T) -> None:
    assert queued_and_lengths(r, keys, task_type) == (expected, expected)


def test_enqueue_claim_and_complete_keep_the_count(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many(T, [Call((i,)) for i in range(5)])
    producer.enqueue(T, priority="high")
    producer.enqueue(T, delay=60)  # delayed: not ready
    exact(r, keys, 6)
    heartbeat(r, keys)
    tasks = claim(r, keys, 4, T)
    exact(r, keys, 2)
    complete(r, keys, *tasks)
    exact(r, keys, 2)
    assert stat(r, keys, T, "queued_repaired") == 0


def test_a_claim_over_a_concurrency_cap_counts_what_it_put_back(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many(T, [Call((i,)) for i in range(6)])
    r.hset(keys.limits, T, json.dumps({"concurrency": 2}))
    heartbeat(r, keys)
    reply = scripts_for(r).claim(
        keys=[keys.active, keys.workers, keys.inflight(W), keys.limits],
        args=[keys.prefix, W, 5, 0, T],
        client=r,
    )
    assert len(reply[3:]) == 2 * 3  # two tasks, the rest put back at the head
    exact(r, keys, 4)


def test_an_undecodable_envelope_leaves_the_count_with_the_list(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue(T)
    r.rpush(keys.queue(T), "{not json")
    r.hincrby(keys.queued, T, 1)
    heartbeat(r, keys)
    claim(r, keys, 5, T)  # one claimed, one dead-lettered: both left the list
    exact(r, keys, 0)


def test_promote_requeue_reap_and_retry_keep_the_count(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue(T, delay=0.001)
    producer.enqueue(T, delay=0.001)
    time.sleep(0.01)
    promote(r, keys)
    exact(r, keys, 2)
    heartbeat(r, keys)
    first, second = claim(r, keys, 2, T)
    exact(r, keys, 0)
    scripts_for(r).requeue(
        keys=[keys.active, keys.workers, keys.inflight(W), keys.worker(W)],
        args=[keys.prefix, W, "some", first["id"]],
        client=r,
    )
    exact(r, keys, 1)
    fail(r, keys, second, "retry", 5000, json.dumps(second), "", 0, "", "")  # via delayed
    exact(r, keys, 1)
    r.zadd(keys.workers, {W: 1})  # the lease expired long ago
    heartbeat(r, keys, worker="w2")
    claimed = claim(r, keys, 1, T, worker="w2")
    r.zadd(keys.workers, {"w2": 1})
    assert len(claimed) == 1
    Scheduler(r, keys=keys).reap()
    exact(r, keys, 1)


def test_admin_purge_cancel_run_now_and_dead_requeue_keep_the_count(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    ids = producer.enqueue_many(T, [Call((i,)) for i in range(4)])
    later = producer.enqueue(T, delay=600)
    assert cancel(ids[1], client=r, keys=keys).removed
    exact(r, keys, 3)
    assert admin.delayed_run_now(r, keys, T, later)
    exact(r, keys, 4)
    heartbeat(r, keys)
    (task,) = claim(r, keys, 1, T)
    fail(r, keys, task, "dead", 0, "boom", "", 30, "", "")
    assert admin.dead_requeue(r, keys, T) == 1
    exact(r, keys, 4)
    producer.enqueue(T, delay=600)  # purged with the ready ones, never counted
    assert admin.queue_purge(r, keys, T, include_delayed=True) == 5
    exact(r, keys, 0)
    producer.enqueue(T)
    assert admin.forget_type(r, keys, T, force=True)
    assert r.hget(keys.queued, T) is None and queued_and_lengths(r, keys, T) == (0, 0)


def test_fan_outs_count_what_they_release(r: redis.Redis, keys: Keys) -> None:
    submit_fanout(r, T, [[i] for i in range(5)], limit=2, keys=keys)
    exact(r, keys, 2)
    heartbeat(r, keys)
    (task,) = claim(r, keys, 1, T)
    complete(r, keys, task)  # its slot passes to a pending sub-task
    exact(r, keys, 2)
    stream = open_fanout(r, T, limit=10, keys=keys)
    stream.add([[i] for i in range(3)])
    exact(r, keys, 5)


def test_the_recount_fixes_a_plain_push_and_counts_the_fix(r: redis.Redis, keys: Keys) -> None:
    r.sadd(keys.types, T, "other")
    r.rpush(keys.queue(T, 3), "a", "b", "c")  # a producer that does not count
    r.hset(keys.queued, "gone", 4)  # a count whose lists were deleted by hand
    scheduler = Scheduler(r, keys=keys)

    assert scheduler.recount() == (2, 7)
    exact(r, keys, 3)
    assert int(r.hget(keys.queued, "gone") or -1) == 0
    assert stat(r, keys, T, "queued_repaired") == stat(r, keys, "gone", "queued_repaired") == 1
    assert stat(r, keys, "other", "queued_repaired") == 0
    assert scheduler.recount() == (0, 0)  # nothing left to fix


@pytest.mark.parametrize("garbage", ["x", "-"])
def test_a_count_that_is_not_a_number_is_repaired(r: redis.Redis, keys: Keys, garbage: str) -> None:
    r.sadd(keys.types, T)
    r.rpush(keys.queue(T), "a")
    r.hset(keys.queued, T, garbage)
    assert Scheduler(r, keys=keys).recount() == (1, 1)
    exact(r, keys, 1)
