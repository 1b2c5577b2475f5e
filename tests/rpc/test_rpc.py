"""RPC over the queue, on a real Redis with real workers.

Most tests run the worker in a thread of the test process (the same Worker
class the CLI runs); the cross-process tests run ``taskscale worker`` and a
caller as separate OS processes, which is how RPC is used in production.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
import rpc_tasks  # noqa: F401  (registers the rpc.* task functions)

from support.waiting import wait_until
from support.workers import processes, running_worker, start, start_worker, stop
from taskscale.keys import Keys
from taskscale.options import TaskOptions
from taskscale.rpc import (
    CallOptions,
    RemoteError,
    RpcHandle,
    TaskTimeout,
    call,
    call_async,
)
from taskscale.worker import RetryPolicy, Worker
from taskscale.worker.execution import TaskRunner

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")
TYPES = ("rpc.add", "rpc.where", "rpc.nothing", "rpc.structure", "rpc.quota", "rpc.unserialisable")


@contextmanager
def worker_thread(url: str, types: tuple[str, ...] = TYPES) -> Iterator[Worker]:
    """A worker in a thread of this process, stopped gracefully on exit."""
    with running_worker(url, types, keys=KEYS, grace_s=5.0, retry=RetryPolicy()) as worker:
        yield worker


def test_call_returns_the_result_computed_by_a_worker(redis_url: str, r: redis.Redis) -> None:
    with worker_thread(redis_url):
        assert call(r, "rpc.add", 2, 3, keys=KEYS, timeout=30) == 5
        assert call(r, "rpc.add", 2, 3, scale=10, keys=KEYS, timeout=30) == 50


def test_json_structures_and_none_survive_the_round_trip(redis_url: str, r: redis.Redis) -> None:
    doc = {"b": [1, 2.5, None, True], "a": {"nested": "ü"}}
    with worker_thread(redis_url):
        result = call(r, "rpc.structure", doc, keys=KEYS, timeout=30)
        nothing = call(r, "rpc.nothing", keys=KEYS, timeout=30)
    assert result == {"echo": doc, "keys": ["a", "b"], "unicode": "žluťoučký kůň"}
    assert nothing is None


def test_remote_exception_is_raised_with_its_type_and_message(
    redis_url: str, r: redis.Redis
) -> None:
    with worker_thread(redis_url), pytest.raises(RemoteError) as caught:
        call(r, "rpc.quota", "alice", keys=KEYS, timeout=30)
    assert caught.value.error_type == "QuotaExceeded"
    assert caught.value.message == "user alice is over quota"
    assert "QuotaExceeded: user alice is over quota" in str(caught.value)
    # The task declares max_retries=0, and a call keeps it: the error at once.
    assert r.hget(KEYS.stats("rpc.quota"), "retried") is None
    assert r.llen(KEYS.dead("rpc.quota")) == 1


def test_an_unserialisable_result_is_a_remote_type_error(redis_url: str, r: redis.Redis) -> None:
    with worker_thread(redis_url), pytest.raises(RemoteError) as caught:
        call(r, "rpc.unserialisable", keys=KEYS, timeout=30)
    assert caught.value.error_type == "TypeError"
    assert "not JSON" in caught.value.message


def test_a_type_no_worker_has_a_function_for_is_a_remote_error(
    redis_url: str, r: redis.Redis
) -> None:
    with worker_thread(redis_url, types=("rpc.missing",)), pytest.raises(RemoteError) as caught:
        call(r, "rpc.missing", keys=KEYS, timeout=30)
    assert caught.value.error_type == "UnknownTaskType"


def test_an_error_in_the_worker_itself_still_answers_the_caller(
    redis_url: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug of ours while running a task must dead-letter it *and* answer the
    # RPC caller (and release a fan-out slot), not leave the caller waiting.
    def broken(self: TaskRunner, task: object) -> object:
        raise RuntimeError("boom inside the worker")

    monkeypatch.setattr(TaskRunner, "run", broken)
    with worker_thread(redis_url), pytest.raises(RemoteError) as caught:
        call(r, "rpc.add", 1, 2, keys=KEYS, timeout=30)
    assert caught.value.error_type == "WorkerError"
    assert "boom inside the worker" in caught.value.message
    assert r.llen(KEYS.dead("rpc.add")) == 1
    assert int(r.hget(KEYS.active, "rpc.add") or 0) == 0


def test_call_times_out_when_no_worker_answers_and_leaves_the_task_queued(
    r: redis.Redis,
) -> None:
    with pytest.raises(TaskTimeout) as caught:
        call(r, "rpc.add", 1, 1, keys=KEYS, timeout=0.3)
    assert isinstance(caught.value, TimeoutError)
    queued = [json.loads(raw) for raw in r.lrange(KEYS.queue("rpc.add"), 0, -1)]
    assert [q["id"] for q in queued] == [caught.value.task_id]
    assert queued[0]["reply_to"] == KEYS.reply(caught.value.task_id)


def test_a_late_reply_expires_with_its_reply_ttl(redis_url: str, r: redis.Redis) -> None:
    handle = call_async(r, "rpc.add", 1, 2, options=CallOptions(reply_ttl_s=7), keys=KEYS)
    with worker_thread(redis_url):
        wait_until(handle.ready)
    ttl = r.ttl(KEYS.reply(handle.id))
    assert 0 < ttl <= 7
    assert handle.get(timeout=0) == 3
    assert not r.exists(KEYS.reply(handle.id))


def test_call_options_carry_task_options_into_the_envelope(r: redis.Redis) -> None:
    options = CallOptions(task_options=TaskOptions(timeout=7, max_retries=5))
    call_async(r, "rpc.add", 1, 2, options=options, keys=KEYS)
    [env] = [json.loads(raw) for raw in r.lrange(KEYS.queue("rpc.add"), 0, -1)]
    assert env["timeout_ms"] == 7000
    assert env["max_retries"] == 5  # CallOptions.max_retries None keeps the task's
    assert "reply_ttl" not in env  # left to the task's result_ttl


def test_async_handle_is_not_ready_until_the_worker_replies(redis_url: str, r: redis.Redis) -> None:
    handle = call_async(r, "rpc.add", 20, 22, keys=KEYS)
    assert not handle.ready()
    with pytest.raises(TaskTimeout):
        handle.get(timeout=0)
    with worker_thread(redis_url):
        wait_until(handle.ready)
    assert handle.get(timeout=5) == 42
    assert handle.get(timeout=0) == 42  # kept by the handle once read


def test_many_concurrent_calls_each_get_their_own_answer(redis_url: str, r: redis.Redis) -> None:
    handles = [call_async(r, "rpc.add", i, 1000, keys=KEYS) for i in range(50)]
    with worker_thread(redis_url):
        results = [h.get(timeout=60) for h in handles]
    assert results == [i + 1000 for i in range(50)]


@pytest.mark.slow
def test_caller_and_worker_in_separate_processes(redis_url: str, r: redis.Redis) -> None:
    worker = start_worker(redis_url, types="rpc.where,rpc.quota", imports=["rpc_tasks"])
    with processes(worker):
        answer = call(r, "rpc.where", keys=KEYS, timeout=60)
        with pytest.raises(RemoteError, match="over quota"):
            call(r, "rpc.quota", "bob", keys=KEYS, timeout=60)
    assert answer["pid"] == worker.pid != os.getpid()


CALLER = """
import sys
import redis
from taskscale.keys import Keys
from taskscale.rpc import call, call_async
r = redis.Redis.from_url(sys.argv[1])
print("sync", call(r, "rpc.add", 40, 2, keys=Keys("taskscale"), timeout=60), flush=True)
print("async", call_async(r, "rpc.add", 1, 1, keys=Keys("taskscale")).id, flush=True)
"""


@pytest.mark.slow
def test_a_caller_process_gets_answers_and_hands_over_an_async_result_by_id(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(redis_url, types="rpc.add", imports=["rpc_tasks"])
    with processes(worker):
        caller = start(redis_url, ["-c", CALLER, redis_url])
        assert caller.wait(120) == 0
        lines = dict(line.split(" ", 1) for line in stop(caller).split("\n") if " " in line)
        handle = RpcHandle.attach(r, lines["async"].strip(), keys=KEYS)
        assert handle.get(timeout=60) == 2
    assert lines["sync"].strip() == "42"


def test_a_wait_longer_than_the_clients_socket_timeout_still_gets_the_reply(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=0.5)
    try:
        handle = call_async(client, "rpc.add", 1, 2, keys=KEYS)
        waiter = threading.Thread(target=lambda: results.append(handle.get(timeout=60)))
        results: list[object] = []
        waiter.start()
        time.sleep(1.5)  # three socket timeouts pass before any worker exists
        with worker_thread(redis_url):
            waiter.join(60)
    finally:
        client.close()
    assert results == [3]


def test_call_and_submit_fanout_take_a_url_like_enqueue(redis_url: str, r: redis.Redis) -> None:
    from taskscale.fanout import submit_fanout

    with worker_thread(redis_url):
        assert call(redis_url, "rpc.add", 2, 3, keys=KEYS, timeout=30) == 5
    fan = submit_fanout(redis_url, "rpc.add", [[1, 1]], limit=1, keys=KEYS)
    assert r.exists(KEYS.fanout(fan.id)) == 1
