"""Workflows run by a real worker (in this process): results passed along
through the worker's completion path, a step's own retries, the awaited
result, and a cancel seen by a running step."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.context import current_task
from taskscale.keys import Keys
from taskscale.options import TaskOptions
from taskscale.tasks import TaskRegistry
from taskscale.workflows import (
    WorkflowFailed,
    WorkflowTimeout,
    cancel,
    chain,
    dag,
    group,
    read,
    step,
    wait,
)

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")
TYPES = ("add", "total", "flaky", "broken", "watch")


def registry(runs: dict[str, int], stopped: threading.Event) -> TaskRegistry:
    reg = TaskRegistry()
    lock = threading.Lock()

    def add(x: int, y: int = 1) -> int:
        return x + y

    def total(values: list[int]) -> int:
        return sum(values)

    def flaky(x: int) -> int:
        with lock:
            runs["flaky"] = runs.get("flaky", 0) + 1
            if runs["flaky"] == 1:
                raise RuntimeError("first run fails")
        return x * 10

    def broken(x: int) -> int:
        raise ValueError(f"cannot take {x}")

    def watch() -> str:
        for _ in range(400):
            if current_task().cancelled:
                stopped.set()
                return "stopped"
            time.sleep(0.025)
        return "ran to the end"

    reg.register("add", add)
    reg.register("total", total)
    reg.register("flaky", flaky, TaskOptions(max_retries=2, retry_backoff=0.05))
    reg.register("broken", broken, TaskOptions(max_retries=1, retry_backoff=0.05))
    reg.register("watch", watch)
    return reg


@pytest.fixture
def reg() -> tuple[TaskRegistry, dict[str, int], threading.Event]:
    runs: dict[str, int] = {}
    stopped = threading.Event()
    return registry(runs, stopped), runs, stopped


def test_a_composed_workflow_returns_its_result_like_a_call(
    redis_url: str, r: redis.Redis, reg: tuple[TaskRegistry, dict[str, int], threading.Event]
) -> None:
    # 1 -> add -> 2; group: add(2)=3, chain(add(2)=3, add(3,y=5)=8); total([3, 8]) = 11
    wf = chain(step("add", 1), group("add", chain("add", step("add", y=5))), "total")
    with running_worker(redis_url, TYPES, threads=4, registry=reg[0], keys=KEYS):
        wf_id = wf.enqueue(client=r, keys=KEYS)
        assert wait(wf_id, timeout=30, client=r, keys=KEYS) == 11


def test_a_retried_step_counts_once_its_final_outcome(
    redis_url: str, r: redis.Redis, reg: tuple[TaskRegistry, dict[str, int], threading.Event]
) -> None:
    d = dag()
    a = d.add(step("flaky", 4))
    d.add(step("add", y=2), after=[a])
    with (
        running_worker(redis_url, TYPES, threads=2, registry=reg[0], keys=KEYS),
        running_scheduler(redis_url, keys=KEYS, max_sleep_s=0.1),
    ):
        wf_id = d.enqueue(client=r, keys=KEYS)
        assert wait(wf_id, timeout=30, client=r, keys=KEYS) == 42
    assert reg[1]["flaky"] == 2


def test_a_dead_lettered_step_fails_the_workflow_with_its_reason(
    redis_url: str, r: redis.Redis, reg: tuple[TaskRegistry, dict[str, int], threading.Event]
) -> None:
    with (
        running_worker(redis_url, TYPES, threads=2, registry=reg[0], keys=KEYS),
        running_scheduler(redis_url, keys=KEYS, max_sleep_s=0.1),
    ):
        wf_id = chain(step("add", 1), "broken", "add").enqueue(client=r, keys=KEYS)
        with pytest.raises(WorkflowFailed) as info:
            wait(wf_id, timeout=30, client=r, keys=KEYS)
    assert info.value.state == "failed"
    assert info.value.reason == "step s1 (broken) failed: ValueError: cannot take 2"
    got = read(wf_id, client=r, keys=KEYS)
    assert got is not None and [s.state for s in got.steps] == ["succeeded", "failed", "cancelled"]
    assert r.llen(KEYS.dead("broken")) == 1  # its retries were its own: one dead letter


def test_a_running_step_sees_its_workflow_cancelled(
    redis_url: str, r: redis.Redis, reg: tuple[TaskRegistry, dict[str, int], threading.Event]
) -> None:
    with running_worker(redis_url, TYPES, threads=2, registry=reg[0], keys=KEYS):
        wf_id = chain("watch", "add").enqueue(client=r, keys=KEYS)
        wait_until(lambda: int(r.hget(KEYS.active, "watch") or 0) == 1, timeout=30)
        assert cancel(wf_id, client=r, keys=KEYS).outcome == "ended"
        assert reg[2].wait(20)
        with pytest.raises(WorkflowFailed, match="cancelled"):
            wait(wf_id, timeout=5, client=r, keys=KEYS)
        wait_until(lambda: int(r.hget(KEYS.active, "watch") or 0) == 0, timeout=30)
    assert r.llen(KEYS.queue("add")) == 0  # the step after it never started


def test_wait_times_out_on_a_workflow_no_worker_runs(r: redis.Redis) -> None:
    wf_id = chain("add").enqueue(client=r, keys=KEYS)
    started = time.monotonic()
    with pytest.raises(WorkflowTimeout, match="0/1 steps done"):
        wait(wf_id, timeout=0.3, client=r, keys=KEYS)
    assert time.monotonic() - started < 2
    with pytest.raises(LookupError):
        wait("unknown-id", timeout=0.1, client=r, keys=KEYS)
