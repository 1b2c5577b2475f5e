"""The scheduler: promotion on time, early wake-up, reaping, several at once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_scheduler
from taskscale.connection import connect
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer
from taskscale.scheduling.scheduler import Scheduler

pytestmark = pytest.mark.integration

LIST_AND_CLOCK = "return {redis.call('TIME'), redis.call('LRANGE', KEYS[1], 0, -1)}"


@contextmanager
def schedulers(url: str, n: int, **settings: Any) -> Iterator[list[Scheduler]]:
    with ExitStack() as stack:
        yield [stack.enter_context(running_scheduler(url, **settings)) for _ in range(n)]


def test_delayed_task_is_promoted_when_due_not_before(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    with schedulers(redis_url, 1):
        time.sleep(0.2)  # asleep with nothing scheduled
        producer.enqueue("a", delay=0.5)  # the wake token makes it look again
        time.sleep(0.2)
        assert r.llen(keys.queue("a")) == 0  # not due yet
        raw = wait_until(lambda: r.lindex(keys.queue("a"), 0), timeout=10)
    env = json.loads(raw)
    claim_ms = int(r.time()[0]) * 1000 + int(r.time()[1]) // 1000
    assert env["due_ms"] >= env["enqueued_ms"] + 500
    assert claim_ms >= env["due_ms"]


def test_earlier_task_wakes_a_sleeping_scheduler(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("a", "far", delay=3600)
    with schedulers(redis_url, 1, max_sleep_s=30.0, lease_s=120.0):
        time.sleep(0.3)  # asleep until the far task (capped at 30 s)
        producer.enqueue("a", "soon", delay=0.2)
        raw = wait_until(lambda: r.lindex(keys.queue("a"), 0), timeout=5)
    assert json.loads(raw)["args"] == ["soon"]


def test_three_schedulers_promote_every_task_exactly_once_never_early(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    count = 600
    early: list[tuple[str, int, int]] = []
    done = threading.Event()

    def watch() -> None:
        """Look at the ready list and the Redis clock atomically, again and again:
        a task in the list before its due time is an early promotion."""
        watcher = connect(redis_url)
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            # one script: atomic on one server and on the list's cluster node
            (sec, usec), ready = watcher.eval(LIST_AND_CLOCK, 1, keys.queue("a"))
            now_ms = int(sec) * 1000 + int(usec) // 1000
            for raw in ready:
                t = json.loads(raw)
                if now_ms < t["due_ms"]:
                    early.append((t["id"], now_ms, t["due_ms"]))
        watcher.close()

    ids: list[str] = []
    watcher = threading.Thread(target=watch, daemon=True)
    with schedulers(redis_url, 3, promote_batch=50):
        watcher.start()
        for i in range(count):  # due over ~1.5 s, in a scrambled order
            ids.append(producer.enqueue("a", i, delay=0.05 + (i * 7919 % count) / 400))
        wait_until(lambda: r.llen(keys.queue("a")) >= count, timeout=30)
        time.sleep(0.3)  # a duplicate would show up now
    done.set()
    watcher.join(10)
    promoted = [json.loads(x) for x in r.lrange(keys.queue("a"), 0, -1)]
    assert len(promoted) == count
    assert sorted(t["id"] for t in promoted) == sorted(ids)
    assert r.zcard(keys.delayed("a")) == 0
    assert early == []


def test_scheduler_reaps_workers_whose_lease_expired(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    scripts = scripts_for(r)
    scripts.heartbeat(keys=[keys.workers, keys.worker("gone")], args=["gone", 300], client=r)
    producer.enqueue("a")
    scripts.claim(
        keys=[keys.active, keys.workers, keys.inflight("gone")],
        args=[keys.prefix, "gone", 1, 0, "a"],
        client=r,
    )
    assert r.hget(keys.active, "a") == b"1"
    with schedulers(redis_url, 2, lease_s=0.4):
        wait_until(lambda: r.llen(keys.queue("a")) == 1, timeout=10)
    assert r.hget(keys.active, "a") == b"0"
    assert r.zcard(keys.workers) == 0 and not r.exists(keys.inflight("gone"))


def test_scheduler_survives_a_redis_restart_and_keeps_promoting() -> None:
    from support.redis_server import RedisServer

    keys = Keys("taskscale")
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        producer = Producer(redis.Redis.from_url(server.url), keys=keys)
        with schedulers(server.url, 1):
            producer.enqueue("a", "before", delay=0.1)
            wait_until(lambda: r.llen(keys.queue("a")) == 1, timeout=10)
            server.restart()  # no persistence: everything is gone, connections drop
            producer.enqueue("a", "after", delay=0.3)
            raw = wait_until(lambda: r.lindex(keys.queue("a"), 0), timeout=30)
        r.close()
    assert json.loads(raw)["args"] == ["after"]
