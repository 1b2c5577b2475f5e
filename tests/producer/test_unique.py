"""Unique tasks: one task per unique key while it is live, released on its outcome."""

from __future__ import annotations

import threading

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_worker
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.tasks import TaskRegistry

pytestmark = pytest.mark.integration


def test_twenty_concurrent_producers_with_one_unique_key_make_one_task(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    ids: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(20)

    def produce() -> None:
        client = redis.Redis.from_url(redis_url)
        producer = Producer(client, keys=keys)
        start.wait(10)
        task_id = producer.enqueue("noop", unique_key="report:42")
        with lock:
            ids.append(task_id)
        client.close()

    threads = [threading.Thread(target=produce) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert len(ids) == 20
    assert len(set(ids)) == 1
    assert r.llen(keys.queue("noop")) == 1
    assert int(r.hget(keys.stats("noop"), "enqueued") or 0) == 1
    assert int(r.hget(keys.stats("noop"), "unique_hits") or 0) == 19  # the others' hits
    assert r.get(keys.unique("report:42")) == ids[0].encode()


def test_a_delayed_unique_task_holds_its_key(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("noop", delay=60, unique_key="k")
    assert producer.enqueue("noop", unique_key="k") == first
    assert r.zcard(keys.delayed("noop")) == 1 and r.llen(keys.queue("noop")) == 0


def test_the_key_is_released_when_the_task_completes(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("noop", unique_key="k")
    with running_worker(redis_url, ("noop",)):
        wait_until(lambda: not r.exists(keys.unique("k")))
    second = producer.enqueue("noop", unique_key="k")
    assert second != first
    assert r.get(keys.unique("k")) == second.encode()


def test_the_window_keeps_the_key_after_completion_then_expires(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("noop", unique_key="k", unique_for=30)
    with running_worker(redis_url, ("noop",)):
        wait_until(lambda: int(r.hget(keys.stats("noop"), "completed") or 0) == 1)
    assert producer.enqueue("noop", unique_key="k", unique_for=30) == first
    assert 25_000 < r.pttl(keys.unique("k")) <= 30_000


def test_the_key_is_released_when_the_window_expires(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("noop", unique_key="k", unique_for=1.0)
    with running_worker(redis_url, ("noop",)):
        wait_until(lambda: int(r.hget(keys.stats("noop"), "completed") or 0) == 1)
    wait_until(lambda: not r.exists(keys.unique("k")), timeout=5)
    second = producer.enqueue("noop", unique_key="k", unique_for=1.0)
    assert second != first
    assert r.llen(keys.queue("noop")) == 1


def test_a_dead_lettered_unique_task_releases_its_key(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("fail", unique_key="k", max_retries=0)
    with running_worker(redis_url, ("fail",)):
        wait_until(lambda: r.llen(keys.dead("fail")) == 1)
        wait_until(lambda: not r.exists(keys.unique("k")))
    assert producer.enqueue("fail", unique_key="k") != ""
    assert r.llen(keys.queue("fail")) == 1


def test_a_retried_unique_task_keeps_its_key(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    calls: list[int] = []
    registry = TaskRegistry()

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")

    registry.register("flaky", flaky)
    first = producer.enqueue("flaky", unique_key="k")
    with running_worker(redis_url, ("flaky",), registry=registry):
        wait_until(lambda: int(r.hget(keys.stats("flaky"), "retried") or 0) == 1)
        assert producer.enqueue("flaky", unique_key="k") == first
    assert r.get(keys.unique("k")) == first.encode()


def test_bad_unique_arguments_are_refused(producer: Producer) -> None:
    with pytest.raises(ValueError, match="unique key"):
        producer.enqueue("noop", unique_key="has space")
    with pytest.raises(ValueError, match="needs a unique_key"):
        producer.enqueue("noop", unique_for=5)
