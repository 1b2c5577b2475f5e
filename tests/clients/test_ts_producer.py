"""The TypeScript producer against the real Python runtime: every enqueue
option lands in the envelope as docs/schema.md says and the Python worker
honours it; RPC, fan-out (submitted and streamed, with results), cancel,
limits and schedules from TypeScript do what the Python API's do."""

from __future__ import annotations

import json

import pytest
import redis

from support.counters import active, stat
from support.node_client import run_node
from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.keys import Keys
from taskscale.limits import get_limits
from taskscale.scheduling.schedules import Schedules
from taskscale.server_clock import server_time

pytestmark = pytest.mark.integration


def queued(r: redis.Redis, keys: Keys, task_type: str, level: int) -> list[dict[str, object]]:
    return [json.loads(e) for e in r.lrange(keys.queue(task_type, level), 0, -1)]


def test_every_enqueue_option_reaches_the_envelope_and_the_python_worker_runs_it(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    options = {"maxRetries": 2, "retryBackoff": [0.5, 1], "retryBackoffMax": 9, "timeout": 5}
    plan = [
        ("high", 0, {"options": {**options, "resultTtl": 60}}),
        ("normal", 5, {}),
        ("low", 9, {"kwargs": {"k": "v"}}),
        (3, 3, {"taskId": "my-task.1"}),
    ]
    ids = []
    for priority, level, opts in plan:
        ids.append(
            run_node(
                redis_url,
                "enqueue",
                {"type": "echo", "args": [level], "opts": {"priority": priority, **opts}},
            )
        )
        [env] = queued(r, keys, "echo", level)
        assert env["id"] == ids[-1] and env["args"] == [level] and env["priority"] == level
        assert isinstance(env["enqueued_ms"], int)  # stamped by the script, from Redis TIME
    assert ids[3] == "my-task.1"
    [first] = queued(r, keys, "echo", 0)
    assert {k: first[k] for k in ("max_retries", "retry_backoff_ms", "timeout_ms")} == {
        "max_retries": 2,
        "retry_backoff_ms": [500, 1000],
        "timeout_ms": 5000,
    }
    assert first["retry_backoff_max_ms"] == 9000 and first["reply_ttl"] == 60
    assert queued(r, keys, "echo", 9)[0]["kwargs"] == {"k": "v"}
    assert "max_retries" not in queued(r, keys, "echo", 5)[0]  # unset: the worker's default

    # unique: one task, the second enqueue gets the holder's id
    unique = {"type": "echo", "opts": {"uniqueKey": "u:1", "uniqueFor": 30}}
    held = run_node(redis_url, "enqueue", unique)
    assert run_node(redis_url, "enqueue", unique) == held
    assert stat(r, keys, "echo", "unique_hits") == 1
    # delayed on the Redis clock
    delayed_id = run_node(redis_url, "enqueue", {"type": "echo", "opts": {"delay": 0.6}})
    [(member, due)] = r.zrange(keys.delayed("echo"), 0, -1, withscores=True)
    assert json.loads(member)["id"] == delayed_id
    assert abs(due - (server_time(r, keys).ms + 600)) < 300

    with running_worker(redis_url, ("echo",)), running_scheduler(redis_url, max_sleep_s=0.1):
        wait_until(lambda: stat(r, keys, "echo", "completed") == 6, timeout=20, what="6 runs")
    assert stat(r, keys, "echo", "enqueued") == 6 and active(r, keys, "echo") == 0
    assert r.get(keys.unique("u:1")) == held.encode()  # held until enqueued_ms + 30 s


def test_malformed_input_is_refused_before_anything_is_written(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    cases = [
        ({"type": "echo", "args": {"a": 1}}, "TypeError", "args must be an array"),
        ({"type": "echo", "opts": {"priority": 12}}, "RangeError", "invalid priority"),
        ({"type": "bad type"}, "RangeError", "invalid task type"),
        ({"type": "echo", "opts": {"options": {"maxRetries": -1}}}, "RangeError", "maxRetries"),
        ({"type": "echo", "opts": {"options": {"timeout": 0}}}, "RangeError", "timeout"),
        ({"type": "echo", "opts": {"uniqueFor": 3}}, "RangeError", "uniqueFor needs a uniqueKey"),
        ({"type": "echo", "opts": {"uniqueKey": "a b"}}, "RangeError", "invalid unique key"),
        (
            {"type": "echo", "args": ["x" * 2000], "opts": {"maxPayloadBytes": 1000}},
            "PayloadTooLarge",
            "over the limit",
        ),
    ]
    for payload, name, text in cases:
        out = run_node(redis_url, "enqueue", payload)
        assert out["ok"] is False and out["name"] == name and text in out["message"], out
    assert r.keys("*") == []


def test_options_from_typescript_are_applied_by_the_python_worker(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    fail = {"maxRetries": 1, "retryBackoff": [0.05]}
    run_node(redis_url, "enqueue", {"type": "fail", "args": ["no"], "opts": {"options": fail}})
    slow = {"type": "sleep", "args": [5], "opts": {"options": {"timeout": 0.3, "maxRetries": 0}}}
    run_node(redis_url, "enqueue", slow)
    with (
        running_worker(redis_url, ("fail", "sleep")),
        running_scheduler(redis_url, max_sleep_s=0.1),
    ):
        wait_until(lambda: stat(r, keys, "fail", "dead") == 1, timeout=20, what="fail dead")
        wait_until(lambda: stat(r, keys, "sleep", "dead") == 1, timeout=20, what="sleep dead")
    assert stat(r, keys, "fail", "failed") == 2 and stat(r, keys, "fail", "retried") == 1
    [letter] = r.lrange(keys.dead("sleep"), 0, -1)
    assert json.loads(letter)["error"].startswith("RunTimeout")


def test_rpc_from_typescript_to_python(redis_url: str, r: redis.Redis, keys: Keys) -> None:
    with running_worker(redis_url, ("echo", "fail")):
        call = {"type": "echo", "args": [1, "a"], "opts": {"kwargs": {"k": 2}, "timeout": 10}}
        assert run_node(redis_url, "call", call) == {"args": [1, "a"], "kwargs": {"k": 2}}
        assert run_node(redis_url, "calls", {"type": "echo", "n": 20}) == [
            {"args": [i], "kwargs": {}} for i in range(20)
        ]
        now = {"type": "fail", "args": ["boom"], "opts": {"maxRetries": 0}}
        err = run_node(redis_url, "call", now)
        assert err["name"] == "RemoteError" and err["errorType"] == "ExampleFailure"
        assert err["remoteMessage"] == "boom"
        assert stat(r, keys, "fail", "retried") == 0  # maxRetries 0: the first error is the reply
        # Unset: the task's own retries (3), as Python's call(); with no scheduler
        # to promote the retry, the caller times out and the task waits delayed.
        kept = run_node(redis_url, "call", {"type": "fail", "args": ["x"], "opts": {"timeout": 1}})
        assert kept["name"] == "TaskTimeout" and stat(r, keys, "fail", "retried") == 1
    out = run_node(redis_url, "call", {"type": "nobody", "opts": {"timeout": 0.5}})
    assert out["name"] == "TaskTimeout" and "no live worker serves 'nobody'" in out["message"]
    refused = run_node(redis_url, "call", {"type": "gone", "opts": {"requireWorker": True}})
    assert refused["name"] == "NoLiveWorker" and not r.exists(keys.queue("gone", 5))


def test_fanouts_from_typescript_run_on_python_workers(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    with running_worker(redis_url, ("echo", "fail"), threads=4):
        sets = [[1], [2], {"x": 3}, [4], [5]]
        done = run_node(
            redis_url, "fanoutSubmit", {"type": "echo", "sets": sets, "opts": {"limit": 2}}
        )
        assert (done["total"], done["succeeded"], done["failed"]) == (5, 5, 0)
        assert done["status"]["limit"] == 2 and done["status"]["running"] == 0
        failing = {
            "type": "fail",
            "sets": [["a"], ["b"]],
            "opts": {"limit": 1, "options": {"maxRetries": 0}},
        }
        assert run_node(redis_url, "fanoutSubmit", failing)["failed"] == 2

        batches = [[[0], [1]], [[2]], [{"k": 3}]]
        stream = {"type": "echo", "batches": batches, "opts": {"limit": 2, "collect": True}}
        out = run_node(redis_url, "fanoutStream", stream)
        assert (out["total"], out["succeeded"], out["closedError"]) == (4, 4, "FanoutClosed")
        results = [(s["index"], s["ok"], s["result"]) for s in out["results"]]
        assert results == [
            (0, True, {"args": [0], "kwargs": {}}),
            (1, True, {"args": [1], "kwargs": {}}),
            (2, True, {"args": [2], "kwargs": {}}),
            (3, True, {"args": [], "kwargs": {"k": 3}}),
        ]
    assert active(r, keys, "echo") == 0 and r.zcard(keys.fanouts_open) == 0


def test_cancel_limits_and_schedules_from_typescript(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    task_id = run_node(redis_url, "enqueue", {"type": "echo"})
    got = run_node(redis_url, "cancel", {"id": task_id})
    assert got == {"state": "queued", "where": "echo", "removed": True}
    assert stat(r, keys, "echo", "cancelled") == 1 and r.llen(keys.queue("echo", 5)) == 0
    assert run_node(redis_url, "cancel", {"id": task_id})["state"] == "unknown"

    assert (
        run_node(
            redis_url,
            "setLimits",
            {"type": "echo", "limits": {"rate": "10/s", "concurrency": 2, "burst": 3}},
        )
        is False
    )
    [limits] = get_limits(client=r, keys=keys).values()
    assert (limits.rate, limits.period_s, limits.burst, limits.concurrency) == (10, 1.0, 3, 2)
    bad = run_node(redis_url, "setLimits", {"type": "echo", "limits": {"rate": "ten a second"}})
    assert bad["name"] == "RangeError" and "invalid rate" in bad["message"]
    assert run_node(redis_url, "clearLimits", {"type": "echo"}) is True
    assert get_limits(client=r, keys=keys) == {}

    every = {
        "name": "tick",
        "type": "echo",
        "args": [1],
        "opts": {"every": 60, "options": {"maxRetries": 1}},
    }
    assert run_node(redis_url, "schedule", every) == "created"
    assert run_node(redis_url, "schedule", every) == "unchanged"
    with running_scheduler(redis_url, max_sleep_s=0.1):
        info = wait_until(
            lambda: (s := Schedules(r, keys=keys).get("tick")) and s.next_ms and s,
            timeout=10,
            what="the first occurrence",
        )
    assert info.task_type == "echo" and info.task["args"] == [1] and info.task["max_retries"] == 1
    assert r.zcard(keys.delayed("echo")) == 1  # materialized as a delayed task
    assert run_node(redis_url, "scheduleControl", {"name": "tick", "mode": "pause"}) == "done"
    [listed] = run_node(redis_url, "schedules")
    assert listed["paused"] is True and listed["everyMs"] == 60000
    assert run_node(redis_url, "scheduleControl", {"name": "tick", "mode": "remove"}) == "done"
    assert Schedules(r, keys=keys).get("tick") is None and r.zcard(keys.delayed("echo")) == 0
