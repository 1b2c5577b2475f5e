"""``async def`` tasks on a worker's event loop, against a real redis-server:
RPC replies, retries then a dead letter, run timeouts, the cooperative
cancellation check, fan-out membership, and the catalog's ``async`` mark."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale import cancel, current_task
from taskscale.catalog import describe_task
from taskscale.cli.catalog import render
from taskscale.fanout import submit_fanout
from taskscale.keys import Keys
from taskscale.options import TaskOptions
from taskscale.producer import Producer
from taskscale.rpc import call
from taskscale.tasks import TaskRegistry

pytestmark = pytest.mark.integration


def stats(r: redis.Redis, keys: Keys, task_type: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(keys.stats(task_type)).items()}


def test_an_rpc_call_to_an_async_task_returns_its_result(redis_url: str, r: redis.Redis) -> None:
    with running_worker(redis_url, ("async_echo",), threads=1):
        result = call(r, "async_echo", 1, "two", keys=Keys("taskscale"), timeout=30, x=3)
    assert result == {"args": [1, "two"], "kwargs": {"x": 3}}


def test_a_failing_async_task_is_retried_then_dead_lettered(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    task_id = producer.enqueue("async_fail", message="no luck", max_retries=2)
    with (
        running_scheduler(redis_url, keys=keys),  # promotes the retries
        running_worker(redis_url, ("async_fail",), threads=1),
    ):
        wait_until(lambda: r.llen(keys.dead("async_fail")) == 1, timeout=30)
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("async_fail"), 0, -1)]
    assert dead["error"] == "ExampleFailure: no luck"
    assert json.loads(dead["envelope"])["id"] == task_id
    assert json.loads(dead["envelope"])["attempts"] == 2
    assert "in async_fail" in dead["traceback"]
    counts = stats(r, keys, "async_fail")
    assert (counts.get("failed"), counts.get("retried")) == (3, 2)
    assert int(r.hget(keys.active, "async_fail") or 0) == 0


def test_an_async_task_past_its_timeout_is_cancelled_and_failed(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    registry = TaskRegistry()
    finished: list[bool] = []

    async def slow() -> None:
        await asyncio.sleep(30)
        finished.append(True)

    registry.register("slow", slow, TaskOptions(timeout=0.3, max_retries=0))
    producer = Producer(r, keys=keys)
    producer.enqueue("slow")
    with running_worker(redis_url, ("slow",), threads=1, registry=registry):
        wait_until(lambda: r.llen(keys.dead("slow")) == 1, timeout=30)
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("slow"), 0, -1)]
    assert dead["error"] == "RunTimeout: the task ran longer than its timeout of 0.3 s"
    assert finished == []


def test_a_running_async_task_sees_its_own_cancellation_flag(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    registry = TaskRegistry()
    seen: list[str] = []

    async def watcher(tag: str) -> str:
        for _ in range(600):  # 30 s at most
            if current_task().cancelled:
                seen.append(f"{tag}:{current_task().task_id}")
                return "stopped early"
            await asyncio.sleep(0.05)
        return "ran to the end"

    registry.register("watch", watcher)
    doomed = producer.enqueue("watch", "doomed")
    spared = producer.enqueue("watch", "spared")
    with running_worker(redis_url, ("watch",), threads=1, registry=registry):
        wait_until(lambda: int(r.hget(keys.active, "watch") or 0) == 2, timeout=30)
        assert cancel(doomed, client=r, keys=keys).state == "running"
        wait_until(lambda: stats(r, keys, "watch").get("completed") == 1, timeout=30)
        assert seen == [f"doomed:{doomed}"]  # each coroutine sees its own task
        assert int(r.hget(keys.active, "watch") or 0) == 1
        assert cancel(spared, client=r, keys=keys).state == "running"
        wait_until(lambda: stats(r, keys, "watch").get("completed") == 2, timeout=30)
    assert seen == [f"doomed:{doomed}", f"spared:{spared}"]


def test_async_fan_out_sub_tasks_release_their_slots(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    fan = submit_fanout(r, "async_echo", [[i] for i in range(6)], limit=2, keys=keys)
    with running_worker(redis_url, ("async_echo",), threads=1):
        wait_until(lambda: int(r.hget(keys.fanout(fan.id), "succeeded") or 0) == 6, timeout=30)
    assert r.llen(keys.fanout_pending(fan.id)) == 0
    assert int(r.hget(keys.fanout(fan.id), "failed") or 0) == 0
    assert stats(r, keys, "async_echo")["completed"] == 6
    assert int(r.hget(keys.fanout(fan.id), "running") or 0) == 0


def test_the_catalog_marks_async_tasks() -> None:
    from taskscale import examples

    entry = describe_task("async_sleep", examples.async_sleep)
    assert entry["async"] is True
    assert describe_task("sleep", examples.sleep)["async"] is False
    text = render(
        {"types": {"async_sleep": {**entry, "workers": ["w"], "variants": 1}}, "unserved": []}
    )
    assert (
        "async_sleep  async taskscale.examples.async_sleep(seconds: float = 1.0) -> float" in text
    )


@pytest.mark.parametrize(
    ("types", "slots"), [(("async_sleep",), 7), (("sleep", "async_sleep"), 9), (("sleep",), 2)]
)
def test_the_registry_record_counts_the_slots_of_each_pool_served(
    redis_url: str, r: redis.Redis, keys: Keys, types: tuple[str, ...], slots: int
) -> None:
    with running_worker(redis_url, types, threads=2, async_slots=7) as worker:
        threads = wait_until(lambda: r.hget(keys.worker(worker.id), "threads"), timeout=30)
        assert int(threads) == slots


def test_a_cancelled_error_of_the_task_own_is_a_failure_not_a_shutdown(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    registry = TaskRegistry()

    async def gives_up() -> None:
        inner = asyncio.get_running_loop().create_future()
        inner.cancel()
        await inner  # raises CancelledError, though nobody cancelled this task

    registry.register("gives_up", gives_up, TaskOptions(max_retries=0))
    Producer(r, keys=keys).enqueue("gives_up")
    with running_worker(redis_url, ("gives_up",), threads=1, registry=registry):
        wait_until(lambda: r.llen(keys.dead("gives_up")) == 1, timeout=30)
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("gives_up"), 0, -1)]
    assert dead["error"].startswith("TaskCancelledItself: the task raised CancelledError")
    assert "in gives_up" in dead["traceback"]
    assert int(r.hget(keys.active, "gives_up") or 0) == 0
