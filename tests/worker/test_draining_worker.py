"""A running worker and the drain flag (issue 23, item 2): while its pod is
flagged in ``{ns}:draining`` it claims nothing although tasks wait; cleared,
it resumes; a flag for another pod changes nothing."""

from __future__ import annotations

import time

import pytest
import redis

from support.counters import stat
from support.waiting import wait_until
from support.workers import running_worker
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration

POD = "drain-test-pod"


def test_a_flagged_worker_claims_nothing_and_resumes_when_cleared(
    r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    producer = Producer(r, keys=keys)
    r.hset(keys.draining, POD, 1)
    with running_worker(redis_url, ("echo",), pod=POD):
        wait_until(lambda: r.zcard(keys.workers) == 1, timeout=10, what="registered")
        for i in range(3):
            producer.enqueue("echo", i)
        time.sleep(2.5)  # two drain polls (claimer.DRAIN_POLL_S) and wake-ups
        assert stat(r, keys, "echo", "claimed") == 0
        assert r.llen(keys.queue("echo")) == 3
        r.hdel(keys.draining, POD)
        wait_until(lambda: stat(r, keys, "echo", "completed") == 3, timeout=10, what="resumed")


def test_a_flag_for_another_pod_changes_nothing(r: redis.Redis, redis_url: str, keys: Keys) -> None:
    producer = Producer(r, keys=keys)
    r.hset(keys.draining, "another-pod", 1)
    with running_worker(redis_url, ("echo",), pod=POD):
        for i in range(3):
            producer.enqueue("echo", i)
        wait_until(lambda: stat(r, keys, "echo", "completed") == 3, timeout=10, what="served")
