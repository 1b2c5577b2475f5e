"""docs/schema.md's plain-command recipes, run as written, work with the scripts.

"Enqueueing from another language" gives a ``MULTI`` enqueue stamped with
``enqueued_ms`` from ``TIME`` and a delayed enqueue whose due time is on the
Redis clock, with the capped scheduler wake token.  These tests run those
commands and check that the runtime's scripts take the tasks as the doc
promises: the queue wait counts from the stamp (and is 0 without it), the
delayed task is promoted once due, the wake lists stay capped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import redis

from support.counters import stat
from support.scripts import claim, heartbeat, promote
from taskscale.keys import WAKE_TOKENS_CAP, Keys

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"


def _redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return seconds * 1000 + micros // 1000


def _plain_enqueue(r: redis.Redis, keys: Keys, task_id: str, *, stamp: bool) -> None:
    doc = {"id": task_id, "type": "email", "args": [], "kwargs": {}, "priority": 5}
    doc |= {"attempts": 0, "max_retries": 3}
    if stamp:
        doc["enqueued_ms"] = _redis_ms(r)  # TIME first, then the MULTI
    pipe = r.pipeline(transaction=True)
    pipe.rpush(keys.queue("email", 5), json.dumps(doc))
    pipe.sadd(keys.types, "email")
    pipe.hincrby(keys.stats("email"), "enqueued", 1)
    pipe.rpush(keys.wake("email"), 1)
    pipe.ltrim(keys.wake("email"), -WAKE_TOKENS_CAP, -1)
    pipe.publish(keys.demand_channel, "email")
    pipe.execute()


def test_the_doc_gives_the_recipes_these_tests_run() -> None:
    text = DOC.read_text(encoding="utf-8")
    recipe = text.split("## Enqueueing from another language", 1)[1].split("\n## ", 1)[0]
    for line in (
        "TIME ",
        '"enqueued_ms":1763750000123}',
        "LTRIM   {taskscale}:wake:email -64 -1",
        "ZADD    {taskscale}:delayed:email <due_ms>",
        "RPUSH   {taskscale}:wake:scheduler 1",
        "LTRIM   {taskscale}:wake:scheduler -64 -1",
    ):
        assert line in recipe, line


def test_a_stamped_plain_enqueue_counts_its_queue_wait(r: redis.Redis, keys: Keys) -> None:
    _plain_enqueue(r, keys, "stamped", stamp=True)
    time.sleep(0.2)
    heartbeat(r, keys)
    (task,) = claim(r, keys, 1, "email")
    assert task["id"] == "stamped"
    assert stat(r, keys, "email", "wait_ms") >= 200
    assert stat(r, keys, "email", "enqueued") == 1


def test_an_unstamped_plain_enqueue_counts_no_wait(r: redis.Redis, keys: Keys) -> None:
    _plain_enqueue(r, keys, "unstamped", stamp=False)
    time.sleep(0.2)
    heartbeat(r, keys)
    (task,) = claim(r, keys, 1, "email")
    assert task["id"] == "unstamped"
    assert stat(r, keys, "email", "wait_ms") == 0  # why the doc says: stamp it


def test_a_plain_delayed_enqueue_on_the_redis_clock_is_promoted_once_due(
    r: redis.Redis, keys: Keys
) -> None:
    now = _redis_ms(r)
    doc = {"id": "later", "type": "email", "args": [], "kwargs": {}, "enqueued_ms": now}
    pipe = r.pipeline(transaction=True)
    pipe.zadd(keys.delayed("email"), {json.dumps(doc): now + 300})
    pipe.sadd(keys.types, "email")
    pipe.hincrby(keys.stats("email"), "enqueued", 1)
    for _ in range(WAKE_TOKENS_CAP + 5):  # many producers: the list stays capped
        pipe.rpush(keys.scheduler_wake, 1)
        pipe.ltrim(keys.scheduler_wake, -WAKE_TOKENS_CAP, -1)
    pipe.execute()
    assert r.llen(keys.scheduler_wake) == WAKE_TOKENS_CAP

    assert promote(r, keys)[0] == 0  # not due yet
    time.sleep(0.35)
    assert promote(r, keys)[0] == 1
    (queued,) = r.lrange(keys.queue("email", 5), 0, -1)
    assert json.loads(queued)["due_ms"] == now + 300
