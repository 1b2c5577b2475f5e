"""Property test of issue 21: no envelope can strand or lose a task.

Hypothesis generates envelopes, valid and malformed (tests/support/envelopes.py),
and each goes to Redis one of three ways: through ``enqueue.lua``, pushed raw
into a ready list, or added raw to the delayed set (for the scheduler).  A real
worker (two slots) and a real scheduler serve them.  After every batch:

* every envelope enqueue accepted or pushed raw ended completed or
  dead-lettered (retries end too), each dead letter with a reason; enqueue
  refused the rest with one line, or skipped it naming the holder of its
  unique key;
* ACTIVE_TASKS is back to 0 and never went below it;
* no slot died: a valid task enqueued after the batch completes, and at the
  end two tasks that each wait for the other complete (both slots alive);
* no key outside the namespace's task keys was written or expired: the
  foreign keys (another namespace's reply key, reply keys of other types, a
  bystander queue, a plain key) are byte for byte what they were, and no
  queue, counter or hash of the schema has a TTL.

``make test`` runs TASKSCALE_FUZZ_ENVELOPES (default 120) envelopes; the
documented long run sets it to 10000 (docs/schema.md, "Validation rules").
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.counters import active, stat
from support.envelopes import FUZZ_TYPE, PREFIX, WRONG_TYPED_REPLIES, envelopes
from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer
from taskscale.tasks import TaskRegistry
from taskscale.worker import RetryPolicy

pytestmark = pytest.mark.integration

ENVELOPES = int(os.environ.get("TASKSCALE_FUZZ_ENVELOPES", "120"))
BATCH = 30
#: Keys no envelope may touch: created first, compared after every batch.
FOREIGN = ["foreign:string", "{other}:reply:x", PREFIX + "q:bystander:5", *WRONG_TYPED_REPLIES]
#: Keys that may carry a TTL (every other key of the namespace must not).
MAY_EXPIRE = (
    ":reply:", ":worker:", ":catalog:", ":bucket:", ":cancel:", ":fanout:", ":unique:",
    ":history:",  # history buckets and the sampled mark expire by design (docs/schema.md)
)  # fmt: skip


def _fuzz_task(*args: Any, **kwargs: Any) -> list[Any]:
    if kwargs.get("fail") is True:
        raise RuntimeError("failing on purpose")
    return list(args)


def _barrier_task(r: redis.Redis, key: str) -> None:
    """Returns once two of it run at once (both slots alive), else times out."""
    r.incr(key)
    deadline = time.monotonic() + 10
    while int(r.get(key) or 0) < 2:
        if time.monotonic() > deadline:
            raise TimeoutError("the other slot never ran")
        time.sleep(0.01)


def _task_id(raw: bytes) -> object:
    """The envelope's id when it has one, else its bytes."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    return doc.get("id", raw) if isinstance(doc, dict) and isinstance(doc.get("id"), str) else raw


def _snapshot(r: redis.Redis) -> dict[str, tuple[Any, ...]]:
    return {k: (r.type(k), r.ttl(k), r.dump(k)) for k in FOREIGN}


def _dead_reasons(r: redis.Redis, keys: Keys) -> list[str]:
    records = r.lrange(keys.dead(FUZZ_TYPE), 0, -1)
    return [json.loads(x.decode("utf-8", "replace"))["error"] for x in records]


def test_no_envelope_strands_or_loses_a_task(r: redis.Redis, redis_url: str, keys: Keys) -> None:
    r.set("foreign:string", "v")
    r.hset("{other}:reply:x", "a", "b")
    r.rpush(PREFIX + "q:bystander:5", "x")
    r.hset(PREFIX + "reply:hashy", "a", "b")
    r.set(PREFIX + "reply:stringy", "s")
    foreign = _snapshot(r)
    producer = Producer(r, keys=keys)
    enqueue = scripts_for(r).enqueue
    registry = TaskRegistry()
    registry.register(FUZZ_TYPE, _fuzz_task)
    registry.register("barrier", lambda: _barrier_task(redis.Redis.from_url(redis_url), "bar"))
    totals = {"accepted": 0, "refused": 0, "skipped": 0, "batches": 0}
    started = time.monotonic()

    def settled() -> bool:
        ended = stat(r, keys, FUZZ_TYPE, "completed") + stat(r, keys, FUZZ_TYPE, "dead")
        pending = r.exists(keys.delayed(FUZZ_TYPE), *keys.queues(FUZZ_TYPE))
        return ended == totals["accepted"] and not pending and active(r, keys, FUZZ_TYPE) == 0

    @settings(
        max_examples=max(1, ENVELOPES // BATCH),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        batch=st.lists(
            st.tuples(
                envelopes(), st.sampled_from(["enqueue", "queue", "delayed"]), st.integers(0, 9)
            ),
            min_size=BATCH,
            max_size=BATCH,
        )
    )
    def one_batch(batch: list[tuple[bytes, str, int]]) -> None:
        used: set[object] = set()
        for raw, route, level in batch:
            task = _task_id(raw)
            if task in used:  # one task id once per batch: two copies of one task
                continue  # at once may merge (one retry envelope), which is not a loss
            used.add(task)
            if route == "enqueue":
                try:
                    reply = enqueue(
                        keys=[keys.types], args=[keys.prefix, FUZZ_TYPE, 0, 0, raw], client=r
                    )
                except redis.ResponseError as exc:
                    assert str(exc).startswith("invalid envelope #1: ") and "\n" not in str(exc)
                    totals["refused"] += 1
                    continue
                if reply[0] == 0:  # its unique_key is held: enqueue named the holder
                    assert len(reply) == 3
                    totals["skipped"] += 1
                    continue
            elif route == "queue":  # as docs/schema.md's plain commands: with a wake token
                r.rpush(keys.queue(FUZZ_TYPE, level), raw)
                r.rpush(keys.wake(FUZZ_TYPE), "1")
            else:
                r.zadd(keys.delayed(FUZZ_TYPE), {raw: 0})
            totals["accepted"] += 1
        producer.enqueue(FUZZ_TYPE, "sentinel")  # a slot still runs tasks
        totals["accepted"] += 1
        totals["batches"] += 1
        if totals["batches"] % 50 == 0:  # progress of a long run (pytest -s)
            print(f"fuzz: {totals['batches']} batches, {time.monotonic() - started:.0f} s")
        wait_until(settled, timeout=60, interval=0.05, what="every envelope ended")
        assert all(reason.strip() for reason in _dead_reasons(r, keys))
        assert stat(r, keys, FUZZ_TYPE, "active_underflow") == 0
        assert _snapshot(r) == foreign
        for key in r.scan_iter(PREFIX + "*"):
            if r.ttl(key) >= 0:
                assert any(part in key.decode() for part in MAY_EXPIRE), key
        assert r.keys("*") and all(
            k.decode("utf-8", "replace").startswith(PREFIX) or k.decode() in FOREIGN
            for k in r.keys("*")
        )

    with (
        running_scheduler(redis_url, max_sleep_s=0.1),
        running_worker(
            redis_url,
            (FUZZ_TYPE, "barrier"),
            threads=2,
            registry=registry,
            retry=RetryPolicy(base_s=0.01, cap_s=0.05, jitter=0.0),
        ),
    ):
        one_batch()
        producer.enqueue("barrier")
        producer.enqueue("barrier")
        wait_until(
            lambda: stat(r, keys, "barrier", "completed") == 2, timeout=30, what="both slots"
        )
    completed, dead = stat(r, keys, FUZZ_TYPE, "completed"), stat(r, keys, FUZZ_TYPE, "dead")
    print(  # the figures of a long run (pytest -s): docs/schema.md quotes them
        f"fuzz: {sum(totals.values()) - totals['batches']} envelopes in {totals['batches']} "
        f"batches, {time.monotonic() - started:.1f} s: refused at enqueue {totals['refused']}, "
        f"skipped (unique key held) {totals['skipped']}, "
        f"completed {completed}, dead-lettered {dead}, "
        f"retried {stat(r, keys, FUZZ_TYPE, 'retried')}"
    )
    assert completed + dead == totals["accepted"]
