"""The TypeScript worker against the real Python runtime: Python producers
and RPC callers are served by it; it claims only for free slots, keeps
ACTIVE_TASKS and IDLE_SINCE exact, retries and dead-letters by the Python
worker's rules, heartbeats, publishes its catalog and drains on SIGTERM."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
import redis

from support.counters import active, stat
from support.node_client import start_ts_worker, stop_ts, ts_output
from support.waiting import wait_until
from support.workers import running_scheduler
from taskscale.catalog import read_catalog
from taskscale.keys import Keys
from taskscale.options import TaskOptions
from taskscale.producer import Producer
from taskscale.rpc import CallOptions, RemoteError, call
from taskscale.server_clock import server_time

pytestmark = pytest.mark.integration

FLEET_TASKS = Path(__file__).resolve().parent / "node" / "fleet_tasks.js"


def worker_ids(r: redis.Redis, keys: Keys) -> list[str]:
    return [w.decode() for w in r.zrange(keys.workers, 0, -1)]


def test_python_producer_to_typescript_worker(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("noop", [[i] for i in range(60)])
    echo_ids = [producer.enqueue("echo", i, priority="high", k=i) for i in range(20)]
    worker = start_ts_worker(redis_url, "noop,echo", concurrency=4)
    try:
        wait_until(lambda: stat(r, keys, "noop", "completed") == 60, timeout=20, what="noops")
        wait_until(lambda: stat(r, keys, "echo", "completed") == 20, timeout=20, what="echoes")
        [wid] = worker_ids(r, keys)
        record = {k.decode(): v.decode() for k, v in r.hgetall(keys.worker(wid)).items()}
        assert record["types"] == "noop,echo" and record["threads"] == "4"
        assert record["pid"] == str(worker.pid) and int(record["heartbeat_ms"]) > 0
        catalog = read_catalog(r, keys)
        assert catalog["types"]["echo"]["served"] and catalog["types"]["echo"]["workers"] == [wid]
        assert catalog["unserved"] == []
        assert catalog["types"]["echo"]["language"] == "typescript"
        wait_until(
            lambda: '"noop":{"completed":60' in r.hget(keys.worker(wid), "stats").decode(),
            what="stats",
        )
    finally:
        log = stop_ts(worker)
    assert worker.returncode == 0, log
    for t in ("noop", "echo"):
        assert active(r, keys, t) == 0 and stat(r, keys, t, "claimed") == stat(
            r, keys, t, "completed"
        )
        idle = float(r.hget(keys.idle_since, t))
        assert abs(idle - server_time(r, keys).unix_s) < 30  # stamped on the Redis clock
    assert r.zcard(keys.workers) == 0 and not r.keys(keys.prefix + "inflight:*")
    assert len(echo_ids) == 20


def test_rpc_from_python_to_typescript(redis_url: str, r: redis.Redis, keys: Keys) -> None:
    worker = start_ts_worker(redis_url, "echo,fail,sleep,ghost")
    try:
        assert call(r, "echo", 1, "a", timeout=10, k=[2]) == {
            "args": [1, "a"],
            "kwargs": {"k": [2]},
        }
        assert call(r, "sleep", seconds=0.1, timeout=10) == 0.1
        with pytest.raises(RemoteError) as failed:
            call(r, "fail", "boom", timeout=10, options=CallOptions(max_retries=0))
        assert (failed.value.error_type, failed.value.message) == ("ExampleFailure", "boom")
        with pytest.raises(RemoteError) as unknown:
            call(r, "ghost", timeout=10)
        assert unknown.value.error_type == "UnknownTaskType"
        slow = CallOptions(max_retries=0, task_options=TaskOptions(timeout=0.2))
        with pytest.raises(RemoteError) as late:
            call(r, "sleep", 5, timeout=10, options=slow)
        assert late.value.error_type == "RunTimeout"
        assert "timeout of 0.2 s" in late.value.message
    finally:
        stop_ts(worker)
    assert active(r, keys, "sleep") == 0 and stat(r, keys, "fail", "dead") == 1


def test_retries_backoff_and_dead_letters_follow_the_python_rules(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    retried = TaskOptions(max_retries=2, retry_backoff=[0.05, 0.1])
    producer.enqueue("fail", "again", options=retried)
    producer.enqueue("strict", 1, 2, b=3)  # kwargs to a task that takes none: at once
    producer.enqueue("declared")  # the registered options: 1 retry
    producer.enqueue("declared", options=TaskOptions(max_retries=0))  # the envelope's win
    producer.enqueue("bigint")  # a result that is not JSON: a failure (retried)
    producer.enqueue("strict", 1, 2, options=TaskOptions(max_retries=0), extra={"reaped": 5})
    r.rpush(keys.queue("strict", 5), '{"id":"obj","type":"strict","args":{"a":1}}')
    worker = start_ts_worker(redis_url, "fail,strict,declared,bigint", module=FLEET_TASKS)
    try:
        with running_scheduler(redis_url, max_sleep_s=0.05):
            wait_until(lambda: stat(r, keys, "fail", "dead") == 1, timeout=20, what="fail dead")
            wait_until(lambda: stat(r, keys, "declared", "dead") == 2, timeout=20, what="declared")
            wait_until(lambda: stat(r, keys, "strict", "dead") == 3, timeout=20, what="strict")
    finally:
        stop_ts(worker)
    assert (stat(r, keys, "fail", "failed"), stat(r, keys, "fail", "retried")) == (3, 2)
    assert (stat(r, keys, "declared", "failed"), stat(r, keys, "declared", "retried")) == (3, 1)
    assert stat(r, keys, "strict", "retried") == 0  # argument mismatch and poison: no retry
    assert stat(r, keys, "bigint", "retried") >= 1
    letters = [json.loads(x) for x in r.lrange(keys.dead("fail"), 0, -1)]
    assert (
        letters[0]["error"] == "ExampleFailure: again"
        and "ExampleFailure" in letters[0]["traceback"]
    )
    assert json.loads(letters[0]["envelope"])["attempts"] == 2
    errors = sorted(json.loads(x)["error"] for x in r.lrange(keys.dead("strict"), 0, -1))
    assert [e.split(":")[0] for e in errors] == [
        '"args" must be an array and "kwargs" an object',
        "LostWorker",
        "TypeError",
    ]
    assert "unexpected keyword arguments b" in errors[2]
    for t in ("fail", "strict", "declared", "bigint"):
        assert active(r, keys, t) == 0


def test_it_claims_only_for_free_slots(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("sleep", [[0.4] for _ in range(8)])
    worker = start_ts_worker(redis_url, "sleep", concurrency=2)
    try:
        wait_until(lambda: active(r, keys, "sleep") == 2, timeout=15, what="2 running")
        [wid] = worker_ids(r, keys)
        samples = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            samples.append(
                (
                    active(r, keys, "sleep"),
                    r.hlen(keys.inflight(wid)),
                    r.llen(keys.queue("sleep", 5)),
                )
            )
            time.sleep(0.01)
        assert max(s[0] for s in samples) == 2 and max(s[1] for s in samples) == 2
        assert samples[0][2] >= 5  # the backlog stays in Redis
        wait_until(lambda: stat(r, keys, "sleep", "completed") == 8, timeout=20, what="all 8")
    finally:
        stop_ts(worker)
    assert active(r, keys, "sleep") == 0


def test_a_concurrency_limit_holds_across_its_slots(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    from taskscale.limits import set_limits

    set_limits("sleep", concurrency=1, client=r, keys=keys)
    producer.enqueue_many("sleep", [[0.15] for _ in range(5)])
    worker = start_ts_worker(redis_url, "sleep", concurrency=4)
    try:
        seen = []
        deadline = time.monotonic() + 20
        while stat(r, keys, "sleep", "completed") < 5 and time.monotonic() < deadline:
            seen.append(active(r, keys, "sleep"))
            time.sleep(0.005)
    finally:
        stop_ts(worker)
    assert stat(r, keys, "sleep", "completed") == 5 and max(seen) == 1


def test_sigterm_drains_running_tasks_and_deregisters(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("sleep", [[1.0], [1.0], [1.0], [1.0]])
    worker = start_ts_worker(redis_url, "sleep", concurrency=2, grace=10)
    wait_until(lambda: active(r, keys, "sleep") == 2, timeout=15, what="2 running")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0, ts_output(worker)
    stop_ts(worker)
    assert stat(r, keys, "sleep", "completed") == 2  # both ran to the end
    assert r.llen(keys.queue("sleep", 5)) == 2 and stat(r, keys, "sleep", "claimed") == 2
    assert active(r, keys, "sleep") == 0 and r.zcard(keys.workers) == 0
    assert not r.keys(keys.prefix + "worker:*") and not r.keys(keys.prefix + "inflight:*")


def test_past_the_grace_period_running_tasks_go_back_to_the_head_of_their_queue(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("sleep", 5)
    worker = start_ts_worker(redis_url, "sleep", concurrency=1, grace=0.3)
    wait_until(lambda: active(r, keys, "sleep") == 1, timeout=15, what="running")
    producer.enqueue("sleep", 0.1)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0
    stop_ts(worker)
    assert stat(r, keys, "sleep", "requeued") == 1 and active(r, keys, "sleep") == 0
    assert json.loads(r.lindex(keys.queue("sleep", 5), 0))["id"] == first  # at the head


def test_a_running_task_sees_its_cancellation(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    from taskscale.cancellation import cancel

    task_id = producer.enqueue("watch")
    worker = start_ts_worker(redis_url, "watch", module=FLEET_TASKS)
    try:
        wait_until(lambda: active(r, keys, "watch") == 1, timeout=15, what="running")
        assert cancel(task_id, client=r, keys=keys).state == "running"
        wait_until(lambda: stat(r, keys, "watch", "completed") == 1, timeout=15, what="done")
    finally:
        stop_ts(worker)


def test_fanouts_from_python_are_served_and_collected_by_the_typescript_worker(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    from taskscale.fanout import submit_fanout
    from taskscale.fanout_stream import StreamSettings, open_fanout
    from taskscale.rpc import call_async

    worker = start_ts_worker(redis_url, "echo,fail", concurrency=3)
    try:
        handle = submit_fanout(r, "echo", [[i] for i in range(7)], limit=2, keys=keys)
        assert handle.wait(20).succeeded == 7
        stream = open_fanout(r, "echo", limit=2, collect=True, keys=keys)
        stream.add([[0], {"k": 1}])
        stream.add([[2]])
        stream.close()
        results = stream.wait(20, collect=True).results
        assert results is not None
        assert [s.result for s in results] == [
            {"args": [0], "kwargs": {}},
            {"args": [], "kwargs": {"k": 1}},
            {"args": [2], "kwargs": {}},
        ]
        once = StreamSettings(options=TaskOptions(max_retries=0))
        failing = open_fanout(r, "fail", limit=1, collect=True, keys=keys, settings=once)
        failing.add([["x"]])
        failing.close()
        [bad] = failing.wait(20, collect=True).results or ()
        assert (bad.ok, bad.error_type, bad.error) == (False, "ExampleFailure", "x")
        rpc = call_async(r, "echo", 5, options=CallOptions(reply_ttl_s=77), keys=keys)
        wait_until(lambda: r.exists(keys.reply(rpc.id)), timeout=10, what="the reply")
        assert 70 <= r.ttl(keys.reply(rpc.id)) <= 77  # the caller's result TTL
        assert rpc.get(5) == {"args": [5], "kwargs": {}}
    finally:
        stop_ts(worker)
    assert active(r, keys, "echo") == 0 and active(r, keys, "fail") == 0


def test_a_stalled_worker_loses_its_lease_its_task_comes_back_and_it_registers_again(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    worker = start_ts_worker(redis_url, "sleep", concurrency=1, lease=1.5, heartbeat=0.3)
    try:
        with running_scheduler(redis_url, max_sleep_s=0.1):  # the reaper
            wait_until(lambda: r.zcard(keys.workers) == 1, timeout=15, what="registered")
            [wid] = worker_ids(r, keys)
            lease_left = r.zscore(keys.workers, wid) - server_time(r, keys).ms
            assert 0 < lease_left <= 1500 and 0 < r.pttl(keys.worker(wid)) <= 1500
            producer.enqueue("sleep", 1.0)
            wait_until(lambda: active(r, keys, "sleep") == 1, timeout=15, what="running")
            worker.send_signal(signal.SIGSTOP)  # a stall past the lease (a GC pause, a frozen VM)
            try:
                wait_until(
                    lambda: stat(r, keys, "sleep", "requeued") == 1, timeout=15, what="reaped"
                )
                assert r.zcard(keys.workers) == 0 and active(r, keys, "sleep") == 0
            finally:
                worker.send_signal(signal.SIGCONT)
            wait_until(lambda: stat(r, keys, "sleep", "completed") == 1, timeout=20, what="rerun")
            assert worker_ids(r, keys) == [wid]  # the same worker, registered again
    finally:
        log = stop_ts(worker)
    assert stat(r, keys, "sleep", "claimed") == 2 and stat(r, keys, "sleep", "completed") == 1
    assert active(r, keys, "sleep") == 0 and stat(r, keys, "sleep", "active_underflow") == 0
    assert worker.returncode == 0, log
