"""The overview's one script call also reads the rates (issue 24, item 5):
the same numbers as ``history_data.rates``; and a type's ready lists are
read as they are (one EXISTS, then LLENs until the non-empty ones are
found), whatever its ready count ``QUEUED`` says."""

from __future__ import annotations

import json

import pytest
import redis

from taskscale import history
from taskscale.dashboard import data, history_data
from taskscale.dashboard.overview_script import read_overview
from taskscale.keys import Keys
from taskscale.limits import set_limits
from taskscale.shards import ShardMap

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")


def test_the_rates_are_history_data_s(r: redis.Redis) -> None:
    seconds, _ = r.time()
    now = history.current_bucket(seconds * 1000)
    r.sadd(KEYS.types, "busy", "old", "idle", "once")
    for age in range(8):  # 7 buckets back and the current, partial one
        r.hset(KEYS.history("busy", now - age), mapping={"c": 10 + age, "f": age, "d": age % 2})
    r.hset(KEYS.history("old", now - 7), mapping={"c": 99})  # before the last minute
    r.hset(KEYS.history("once", now - 3), mapping={"c": 6})
    set_limits("limited-only", concurrency=1, client=r, keys=KEYS)  # not in `types`
    r.hset(KEYS.history("limited-only", now - 1), mapping={"c": 5})
    found = read_overview(r, KEYS, rates=True)["rates"]
    assert found == history_data.rates(r, ShardMap((KEYS.namespace,)))
    assert list(found) == ["busy", "idle", "old", "once"]
    busy = found["busy"]
    assert busy["done_per_s"] == [1.6, 1.5, 1.4, 1.3, 1.2, 1.1]  # oldest first
    assert busy["completed_per_s"] == pytest.approx(81 / 60)
    assert busy["failed_per_s"] == pytest.approx(21 / 60)
    assert busy["dead_per_s"] == pytest.approx(3 / 60)
    assert found["once"]["done_per_s"] == [0.0, 0.0, 0.0, 0.6, 0.0, 0.0]
    assert found["old"]["completed_per_s"] == 0.0 == found["idle"]["completed_per_s"]
    assert "rates" not in read_overview(r, KEYS)  # only asked for
    assert data.overview(r, ShardMap((KEYS.namespace,)), rates=True)["rates"] == found


def test_the_ready_lists_are_read_whatever_the_count_says(r: redis.Redis) -> None:
    env = json.dumps({"id": "a", "type": "t", "args": [], "kwargs": {}, "enqueued_ms": 1})
    r.sadd(KEYS.types, "counted", "uncounted", "drifted", "ends")
    r.rpush(KEYS.queue("counted", 2), env, env)
    r.hset(KEYS.queued, "counted", 2)
    r.rpush(KEYS.queue("uncounted", 4), env)  # a producer that keeps no count
    r.rpush(KEYS.queue("drifted", 1), env)  # pushed by hand after the count said 0
    r.hset(KEYS.queued, "drifted", 0)
    r.rpush(KEYS.queue("ends", 0), env)  # the first and the last level
    r.rpush(KEYS.queue("ends", 9), env, env)
    types = read_overview(r, KEYS)["types"]
    assert types["ends"]["queued_by_priority"] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert types["counted"]["queued_by_priority"] == [0, 0, 2, 0, 0, 0, 0, 0, 0, 0]
    assert types["counted"]["oldest_ready_s"] is not None
    assert types["uncounted"]["queued_by_priority"][4] == 1
    # the count is not read: the console shows what the lists hold even
    # before the scheduler's recount repairs a drifted count
    assert types["drifted"]["queued_by_priority"] == [0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert types["drifted"]["oldest_ready_s"] is not None
