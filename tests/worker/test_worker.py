"""The worker, running in-process against a real redis-server."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
import redis

from support.counters import stat
from support.redis_server import RedisServer, free_port
from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.keys import Keys
from taskscale.metrics import WorkerMetrics
from taskscale.producer import Call, Producer
from taskscale.tasks import TaskRegistry
from taskscale.tasks import registry as examples_registry
from taskscale.worker import Worker, WorkerSettings

pytestmark = pytest.mark.integration


def test_worker_runs_tasks_and_leaves_counters_at_zero(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("noop", [()] * 50)
    with running_worker(redis_url, ("noop",), threads=4):
        wait_until(lambda: stat(r, keys, "noop", "completed") == 50)
        wait_until(lambda: int(r.hget(keys.active, "noop") or 0) == 0)
    assert r.llen(keys.queue("noop")) == 0
    assert r.hget(keys.idle_since, "noop") is not None


def test_worker_claims_only_for_free_threads(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("sleep", [Call(kwargs={"seconds": 0.6})] * 6)
    with running_worker(redis_url, ("sleep",), threads=2) as worker:
        wait_until(lambda: int(r.hget(keys.active, "sleep") or 0) == 2)
        samples = []
        for _ in range(10):
            samples.append(
                (int(r.hget(keys.active, "sleep") or 0), r.hlen(keys.inflight(worker.id)))
            )
            time.sleep(0.05)
        assert all(a <= 2 and held <= 2 for a, held in samples), samples
        assert r.llen(keys.queue("sleep")) >= 2  # the backlog stays visible in Redis
        wait_until(lambda: stat(r, keys, "sleep", "completed") == 6, timeout=30)


def test_idle_worker_wakes_on_enqueue_without_polling(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    with running_worker(redis_url, ("noop",), threads=1, idle_wait_s=30, heartbeat_s=9, lease_s=30):
        wait_until(lambda: r.zcard(keys.workers) == 1)
        time.sleep(0.3)  # now asleep in BLPOP
        before = int(r.info("stats")["total_commands_processed"])
        time.sleep(0.5)
        idle_commands = int(r.info("stats")["total_commands_processed"]) - before
        started = time.monotonic()
        producer.enqueue("noop")
        wait_until(lambda: stat(r, keys, "noop", "completed") == 1)
        woke_in = time.monotonic() - started
    assert idle_commands <= 3  # the INFO itself, maybe a heartbeat: no polling
    assert woke_in < 10  # woken by the token, not the 30 s safety timeout


def test_priorities_run_most_urgent_first(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    order: list[str] = []
    reg = TaskRegistry()
    reg.register("job", lambda name: order.append(name))
    producer.enqueue("job", "low", priority="low")
    producer.enqueue("job", "normal")
    producer.enqueue("job", "high", priority="high")
    with running_worker(redis_url, ("job",), threads=1, registry=reg):
        wait_until(lambda: len(order) == 3)
    assert order == ["high", "normal", "low"]


def test_failing_task_is_retried_then_dead_lettered(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:

    producer.enqueue("fail", message="nope", max_retries=2)
    with running_scheduler(redis_url, keys=keys), running_worker(redis_url, ("fail",), threads=1):
        wait_until(lambda: r.llen(keys.dead("fail")) == 1)
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("fail"), 0, -1)]
    assert dead["error"] == "ExampleFailure: nope"
    assert json.loads(dead["envelope"])["attempts"] == 2
    assert stat(r, keys, "fail", "failed") == 3 and stat(r, keys, "fail", "retried") == 2
    assert int(r.hget(keys.active, "fail") or 0) == 0


def test_unknown_type_is_dead_lettered_not_dropped(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("mystery", 1)
    with running_worker(redis_url, ("mystery",), threads=1, registry=TaskRegistry()):
        wait_until(lambda: r.llen(keys.dead("mystery")) == 1)
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("mystery"), 0, -1)]
    assert dead["error"].startswith("UnknownTaskType: no function registered for task type")
    assert int(r.hget(keys.active, "mystery") or 0) == 0


def test_task_whose_worker_died_max_lost_times_is_dead_lettered_not_run_again(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    ran: list[str] = []
    reg = TaskRegistry()
    reg.register("pill", lambda name: ran.append(name))
    producer.enqueue("pill", "survivor", extra={"reaped": 1})
    producer.enqueue("pill", "poison", extra={"reaped": 2})
    with running_worker(redis_url, ("pill",), threads=1, registry=reg, max_lost=2):
        wait_until(lambda: r.llen(keys.dead("pill")) == 1 and ran == ["survivor"])
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("pill"), 0, -1)]
    assert dead["error"].startswith("LostWorker: its worker died 2 times")
    assert json.loads(dead["envelope"])["args"] == ["poison"]
    assert int(r.hget(keys.active, "pill") or 0) == 0


def test_result_that_is_not_json_fails_the_task_with_a_clear_error(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    reg = TaskRegistry()
    reg.register("bad", lambda: {1, 2})
    producer.enqueue("bad", max_retries=0)
    with running_worker(redis_url, ("bad",), threads=1, registry=reg):
        wait_until(lambda: r.llen(keys.dead("bad")) == 1)
    [dead] = [json.loads(d) for d in r.lrange(keys.dead("bad"), 0, -1)]
    assert dead["error"].startswith("TypeError: result of bad is not JSON-serialisable")


def test_rpc_reply_carries_the_result(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("echo", 1, "x", task_id="rpc1", extra={"reply_to": keys.reply("rpc1")}, k=2)
    with running_worker(redis_url, ("echo",), threads=1):
        popped = r.blpop([keys.reply("rpc1")], timeout=20)
    assert popped is not None
    assert json.loads(popped[1]) == {
        "id": "rpc1",
        "ok": True,
        "result": {"args": [1, "x"], "kwargs": {"k": 2}},
    }


def test_registry_record_shows_busy_threads_and_types(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("sleep", seconds=1.5)
    with running_worker(redis_url, ("sleep", "noop"), threads=3, heartbeat_s=0.2) as worker:
        record = wait_until(
            lambda: (rec := r.hgetall(keys.worker(worker.id))) and rec.get(b"busy") == b"1" and rec
        )
        assert record[b"types"] == b"sleep,noop" and record[b"threads"] == b"3"
        assert record[b"id"] == worker.id.encode() and int(record[b"pid"]) > 0
        assert 0 < r.pttl(keys.worker(worker.id)) <= 10_000
    assert r.zscore(keys.workers, worker.id) is None  # deregistered on stop


def test_worker_survives_a_redis_restart_and_resumes() -> None:
    keys = Keys("taskscale")
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        producer = Producer(redis.Redis.from_url(server.url), keys=keys)
        with running_worker(server.url, ("noop",), threads=2, heartbeat_s=0.2):
            producer.enqueue("noop")
            wait_until(lambda: int(r.hget(keys.stats("noop"), "completed") or 0) == 1)
            server.restart()  # no persistence: the data is gone, the worker must re-register
            wait_until(lambda: r.zcard(keys.workers) == 1, timeout=30)
            producer.enqueue_many("noop", [()] * 5)
            wait_until(lambda: int(r.hget(keys.stats("noop"), "completed") or 0) == 5, timeout=30)
        r.close()


def test_metrics_endpoint_counts_tasks_by_type_and_outcome(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    metrics = WorkerMetrics(types=("noop",), threads=2)
    port = free_port()
    metrics.serve(port, addr="127.0.0.1")
    worker = Worker(
        redis.Redis.from_url(redis_url),
        WorkerSettings(types=("noop",), threads=2, idle_wait_s=0.5),
        keys=keys,
        registry=examples_registry,
        metrics=metrics,
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        producer.enqueue_many("noop", [()] * 3)
        wait_until(lambda: stat(r, keys, "noop", "completed") == 3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        worker.request_stop()
        thread.join(20)
    assert 'taskscale_worker_tasks_total{outcome="completed",type="noop"} 3.0' in text
    assert 'taskscale_worker_queue_wait_seconds_count{type="noop"} 3.0' in text
    assert "taskscale_worker_threads 2.0" in text


def test_claims_rotate_between_types_so_one_backlog_does_not_starve_another(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    order: list[str] = []
    reg = TaskRegistry()
    reg.register("a", lambda: order.append("a"))
    reg.register("b", lambda: order.append("b"))
    producer.enqueue_many("a", [()] * 6)
    producer.enqueue_many("b", [()] * 6)
    with running_worker(redis_url, ("a", "b"), threads=1, registry=reg):
        wait_until(lambda: len(order) == 12)
    assert order[:6].count("b") >= 2 and order[:6].count("a") >= 2, order


def test_status_lists_the_live_worker_and_per_type_counts(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    from taskscale.status import collect, render

    producer.enqueue("sleep", seconds=1.5)
    producer.enqueue("sleep", seconds=0.01, delay=60)
    with running_worker(redis_url, ("sleep",), threads=2, heartbeat_s=0.2) as worker:
        wait_until(lambda: r.hget(keys.worker(worker.id), "busy") == b"1")
        status = collect(r, keys)
        text = render(status)
    [entry] = status["workers"]
    assert entry["id"] == worker.id and entry["busy"] == 1 and entry["threads"] == 2
    assert entry["types"] == ["sleep"]
    sleep = status["types"]["sleep"]
    assert (sleep["queued"], sleep["delayed"], sleep["active"]) == (0, 1, 1)
    assert worker.id in text and "1/2" in text


def test_the_thread_gauge_counts_every_slot_the_busy_gauge_counts(
    redis_url: str, keys: Keys
) -> None:
    # busy counts async slots too: a threads gauge of --threads alone let
    # busy / threads pass 100 % on a worker of async types
    both = WorkerMetrics(types=("noop", "async_echo"), threads=2)
    Worker(
        redis.Redis.from_url(redis_url),
        WorkerSettings(types=("noop", "async_echo"), threads=2, async_slots=5),
        keys=keys,
        registry=examples_registry,
        metrics=both,
    )
    assert both.registry.get_sample_value("taskscale_worker_threads") == 7
    assert both.registry.get_sample_value("taskscale_worker_async_slots") == 5
    only_async = WorkerMetrics(types=("async_echo",), threads=4)
    Worker(
        redis.Redis.from_url(redis_url),
        WorkerSettings(types=("async_echo",), threads=4, async_slots=5),
        keys=keys,
        registry=examples_registry,
        metrics=only_async,
    )
    assert only_async.registry.get_sample_value("taskscale_worker_threads") == 5  # no threads
    assert only_async.registry.get_sample_value("taskscale_worker_async_slots") == 5


def test_a_lost_claim_reply_is_reconciled_by_returning_the_unknown_tasks(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    worker = Worker(
        redis.Redis.from_url(redis_url),
        WorkerSettings(types=("noop",), threads=2, worker_id="w-lost"),
        keys=keys,
        registry=examples_registry,
    )
    worker._reporter.heartbeat()  # registered, as run() does first
    producer.enqueue_many("noop", [()] * 3)
    # the script runs, its reply never arrives: two tasks in flight that the
    # worker does not know it holds
    worker._scripts.claim(
        keys=[keys.active, keys.workers, keys.inflight("w-lost"), keys.limits],
        args=[keys.prefix, "w-lost", 2, 0, "noop"],
        client=r,
    )
    assert r.hlen(keys.inflight("w-lost")) == 2 and r.llen(keys.queue("noop")) == 1

    worker._claimer.reconcile()

    assert r.hlen(keys.inflight("w-lost")) == 0
    assert r.llen(keys.queue("noop")) == 3
    assert int(r.hget(keys.active, "noop") or 0) == 0


def test_a_wrong_typed_key_no_longer_stops_the_worker_it_waits_and_goes_on(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    """Issue 21 item 6 changed this test: a key of the wrong type used to stop
    the worker with exit code 1 (so a fleet crash-looped); now the claim is
    refused before any write, reported, and the worker goes on once it is fixed."""
    worker = Worker(
        redis.Redis.from_url(redis_url),
        WorkerSettings(types=("noop",), threads=1, idle_wait_s=0.2, grace_s=0),
        keys=keys,
        registry=examples_registry,
    )
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: r.zscore(keys.workers, worker.id) is not None)
        r.set(keys.limits, "not a hash")  # the next claim refuses it: BADKEY
        thread.join(2)
        assert thread.is_alive() and codes == []  # not stopped
        r.delete(keys.limits)
        Producer(r, keys=keys).enqueue("noop")
        wait_until(lambda: stat(r, keys, "noop", "completed") == 1, timeout=20)
    finally:
        worker.request_stop()
        thread.join(30)
        r.delete(keys.limits)
    assert codes == [0]
    assert r.zscore(keys.workers, worker.id) is None  # deregistered as usual
