"""Graceful shutdown of a real ``taskscale worker`` process on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
import redis

from support.waiting import wait_until
from support.workers import example_worker, sigterm_twice
from taskscale.keys import Keys
from taskscale.producer import Call, Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def sleep_worker(url: str, *extra: str) -> subprocess.Popen[bytes]:
    return example_worker(url, "sleep", "--threads", "2", *extra)


def busy(r: redis.Redis, keys: Keys) -> int:
    return int(r.hget(keys.active, "sleep") or 0)


def test_sigterm_lets_short_tasks_finish_and_exits_zero(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("sleep", [Call(kwargs={"seconds": 1.0})] * 2)
    proc = sleep_worker(redis_url, "--grace", "20")
    try:
        wait_until(lambda: busy(r, keys) == 2, timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.communicate()
    assert int(r.hget(keys.stats("sleep"), "completed") or 0) == 2
    assert r.llen(keys.queue("sleep")) == 0 and busy(r, keys) == 0
    assert r.zcard(keys.workers) == 0


def test_grace_period_end_returns_long_tasks_to_the_head_of_their_queue(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    long_ids = producer.enqueue_many("sleep", [Call(kwargs={"seconds": 60})] * 2)
    waiting = producer.enqueue("sleep", seconds=0.1)
    proc = sleep_worker(redis_url, "--grace", "0.5")
    try:
        wait_until(lambda: busy(r, keys) == 2, timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.communicate()
    queue = [json.loads(x)["id"] for x in r.lrange(keys.queue("sleep"), 0, -1)]
    assert sorted(queue[:2]) == sorted(long_ids) and queue[2] == waiting
    assert busy(r, keys) == 0
    assert int(r.hget(keys.stats("sleep"), "requeued") or 0) == 2
    assert not r.keys(keys.prefix + "inflight:*") and r.zcard(keys.workers) == 0


def test_second_sigterm_stops_at_once(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("sleep", seconds=60)
    proc = sleep_worker(redis_url, "--grace", "120")
    try:
        wait_until(lambda: busy(r, keys) == 1, timeout=30)
        assert sigterm_twice(proc) == 0  # long before the 120 s grace
    finally:
        proc.kill()
        proc.communicate()
    assert r.llen(keys.queue("sleep")) == 1 and busy(r, keys) == 0
