"""The overview keeps the rates of a last full history bucket (issue 24,
item 5): past buckets never change (writers add to the current one only),
so while the last full bucket is the same the script does not read the
history again -- and the rates still follow the types enqueued now."""

from __future__ import annotations

import time

import pytest
import redis

from taskscale import history
from taskscale.dashboard.overview_script import read_overview
from taskscale.keys import Keys

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")


def _bucket_with_time_left(r: redis.Redis) -> int:
    """The current bucket, once at least 3 s of it are left (so that two
    reads a moment apart see the same last full bucket)."""
    while True:
        seconds, micros = r.time()
        now_ms = seconds * 1000 + micros // 1000
        left_ms = (history.current_bucket(now_ms) + 1) * history.BUCKET_S * 1000 - now_ms
        if left_ms >= 3000:
            return history.current_bucket(now_ms)
        time.sleep(left_ms / 1000 + 0.05)


def test_the_same_last_full_bucket_is_not_read_again(r: redis.Redis) -> None:
    now = _bucket_with_time_left(r)
    r.sadd(KEYS.types, "busy", "gone")
    r.hset(KEYS.history("busy", now - 1), mapping={"c": 30})
    first = read_overview(r, KEYS, rates=True)["rates"]
    assert first["busy"]["done_per_s"] == [0.0, 0.0, 0.0, 0.0, 0.0, 3.0]

    # a past bucket changed by hand (no writer does): held, so not seen ...
    r.hset(KEYS.history("busy", now - 1), mapping={"c": 90})
    r.sadd(KEYS.types, "new")  # ... while the types follow what is enqueued now
    r.srem(KEYS.types, "gone")
    second = read_overview(r, KEYS, rates=True)["rates"]
    assert list(second) == ["busy", "new"]
    assert second["busy"] == first["busy"]
    assert second["new"]["completed_per_s"] == 0.0
    assert second["new"]["done_per_s"] == [0.0] * 6

    # held per client: another client reads the history itself
    other = redis.Redis(connection_pool=r.connection_pool)
    assert read_overview(other, KEYS, rates=True)["rates"]["busy"]["done_per_s"][-1] == 9.0


def test_a_new_last_full_bucket_is_read(r: redis.Redis) -> None:
    now = _bucket_with_time_left(r)
    r.sadd(KEYS.types, "busy")
    r.hset(KEYS.history("busy", now), mapping={"c": 40})  # the current, partial bucket
    assert read_overview(r, KEYS, rates=True)["rates"]["busy"]["completed_per_s"] == 0.0
    while history.current_bucket(int(r.time()[0]) * 1000) == now:  # it becomes full
        time.sleep(0.2)
    assert read_overview(r, KEYS, rates=True)["rates"]["busy"]["done_per_s"][-1] == 4.0
