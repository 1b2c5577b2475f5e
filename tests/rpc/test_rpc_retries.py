"""RPC calls keep the task's retries (CallOptions.max_retries None) and still
get one reply; max_retries=0 makes the first error the reply (issue 26)."""

from __future__ import annotations

import json
import time

import pytest
import redis
import rpc_tasks  # noqa: F401  (registers the rpc.* task functions)

from support.workers import running_scheduler, running_worker
from taskscale.keys import Keys
from taskscale.options import TaskOptions
from taskscale.rpc import CallOptions, RemoteError, call, call_async
from taskscale.worker import RetryPolicy

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")


def stat(r: redis.Redis, task_type: str, name: str) -> int:
    return int(r.hget(KEYS.stats(task_type), name) or 0)


def test_a_task_failing_once_answers_the_call_with_its_retry(
    redis_url: str, r: redis.Redis
) -> None:
    with (
        running_scheduler(redis_url, keys=KEYS),
        running_worker(redis_url, ("rpc.once",), keys=KEYS, grace_s=5.0, retry=RetryPolicy()),
    ):
        handle = call_async(r, "rpc.once", 7, keys=KEYS)
        assert handle.get(timeout=30) == {"n": 7, "attempt": 2}
        time.sleep(0.5)  # a second reply, if one were pushed, would be here by now
    assert not r.exists(KEYS.reply(handle.id))  # the one reply was read; no other came
    assert (stat(r, "rpc.once", "retried"), stat(r, "rpc.once", "completed")) == (1, 1)
    assert stat(r, "rpc.once", "dead") == 0


def test_max_retries_zero_makes_the_first_error_the_reply(redis_url: str, r: redis.Redis) -> None:
    with (
        running_worker(redis_url, ("rpc.once",), keys=KEYS, grace_s=5.0, retry=RetryPolicy()),
        pytest.raises(RemoteError) as caught,
    ):
        call(r, "rpc.once", 1, keys=KEYS, timeout=30, options=CallOptions(max_retries=0))
    assert caught.value.message == "first run fails"
    assert stat(r, "rpc.once", "retried") == 0 and stat(r, "rpc.once", "dead") == 1


def test_the_envelope_carries_the_calls_retries_only_when_it_sets_them(r: redis.Redis) -> None:
    def enqueued(options: CallOptions) -> dict[str, object]:
        call_async(r, "rpc.add", 1, 2, options=options, keys=KEYS)
        env: dict[str, object] = json.loads(r.lpop(KEYS.queue("rpc.add")) or b"{}")
        return env

    assert "max_retries" not in enqueued(CallOptions())  # the worker's @task decides
    assert enqueued(CallOptions(task_options=TaskOptions(max_retries=5)))["max_retries"] == 5
    both = CallOptions(max_retries=1, task_options=TaskOptions(max_retries=5))
    assert enqueued(both)["max_retries"] == 1  # the call's own wins
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises((ValueError, TypeError)):
            CallOptions(max_retries=bad)  # type: ignore[arg-type]
