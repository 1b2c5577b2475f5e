"""taskscale.cancel against a real redis-server and real workers: queued and
delayed tasks are removed atomically with counters right; a running task
sees current_task().cancelled."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_worker
from taskscale import cancel, current_task
from taskscale.cli import main
from taskscale.keys import Keys
from taskscale.metrics import WorkerMetrics
from taskscale.producer import Producer
from taskscale.rpc import RemoteError, call_async
from taskscale.status import collect, render
from taskscale.tasks import TaskRegistry

pytestmark = pytest.mark.integration


def stats(r: redis.Redis, keys: Keys, task_type: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(keys.stats(task_type)).items()}


def test_a_queued_task_is_removed_and_counted(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    keep = producer.enqueue("mail", 1)
    gone = producer.enqueue("mail", 2, priority="high")
    result = cancel(gone, client=r, keys=keys)
    assert (result.state, result.where, result.removed) == ("queued", "mail", True)
    queued = [json.loads(e)["id"] for e in r.lrange(keys.queue("mail"), 0, -1)]
    assert queued == [keep] and r.llen(keys.queue("mail", 0)) == 0
    assert stats(r, keys, "mail")["cancelled"] == 1
    status = collect(r, keys)
    assert (status["types"]["mail"]["queued"], status["types"]["mail"]["cancelled"]) == (1, 1)
    header, *rows = render(status).splitlines()[:2]
    column = header.split().index("CANCELLED")
    assert rows[0].split()[0] == "mail" and rows[0].split()[column] == "1"
    assert cancel(gone, client=r, keys=keys).state == "unknown"  # only once


def test_the_search_limit_is_shared_by_a_types_priority_levels(
    r: redis.Redis, keys: Keys, producer: Producer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lists are read in chunks of 1000 while fewer than the limit were read
    producer.enqueue_many("mail", [(i,) for i in range(1500)], priority=0)
    wanted = producer.enqueue("mail", "x", priority=1)  # the 1501st entry
    monkeypatch.setattr("taskscale.cancellation.SEARCH_LIMIT", 1500)
    assert cancel(wanted, client=r, keys=keys, task_type="mail").state == "unknown"
    assert r.llen(keys.queue("mail", 1)) == 1  # beyond the limit: left alone
    monkeypatch.setattr("taskscale.cancellation.SEARCH_LIMIT", 1501)
    assert cancel(wanted, client=r, keys=keys, task_type="mail").state == "queued"
    assert r.llen(keys.queue("mail", 1)) == 0 and r.llen(keys.queue("mail", 0)) == 1500


def test_a_delayed_task_is_removed_and_its_unique_key_released(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("report", delay=3600, unique_key="daily")
    assert producer.enqueue("report", delay=3600, unique_key="daily") == first
    assert cancel(first, client=r, keys=keys, task_type="report").state == "delayed"
    assert r.zcard(keys.delayed("report")) == 0
    second = producer.enqueue("report", delay=3600, unique_key="daily")
    assert second != first  # the key was released with the cancelled task


def test_an_rpc_caller_is_answered_with_cancelled(r: redis.Redis, keys: Keys) -> None:
    handle = call_async(r, "rpc.slow", keys=keys)
    assert cancel(handle.id, client=r, keys=keys).removed
    with pytest.raises(RemoteError) as caught:
        handle.get(timeout=10)
    assert caught.value.error_type == "Cancelled"


def test_a_running_task_sees_the_flag_and_stops_early(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    started = threading.Event()
    seen: list[str] = []
    claimed: list[int] = []

    def long_job() -> str:
        claimed.append(current_task().claimed_ms)
        started.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if current_task().cancelled:
                seen.append(current_task().task_id)
                assert current_task().cancelled  # stays true; counted once
                return "stopped early"
            time.sleep(0.05)
        return "ran to the end"

    registry = TaskRegistry()
    registry.register("long", long_job)
    metrics = WorkerMetrics(types=("long",), threads=1)
    task_id = producer.enqueue("long")
    [raw] = r.lrange(keys.queue("long"), 0, -1)
    enqueued_ms = json.loads(raw)["enqueued_ms"]
    with running_worker(redis_url, ("long",), threads=1, registry=registry, metrics=metrics):
        assert started.wait(15)
        seconds, micros = r.time()
        assert enqueued_ms <= claimed[0] <= seconds * 1000 + micros // 1000  # Redis clock
        assert (
            metrics.registry.get_sample_value(
                "taskscale_worker_cancels_seen_total", {"type": "long"}
            )
            == 0
        )
        result = cancel(task_id, client=r, keys=keys)
        assert result.state == "running" and result.where
        wait_until(lambda: stats(r, keys, "long").get("completed") == 1)
    assert seen == [task_id]
    assert int(r.hget(keys.active, "long") or 0) == 0
    # the run ended as its function decided (completed); "cancelled" counts removals only
    assert "cancelled" not in stats(r, keys, "long")
    assert (
        metrics.registry.get_sample_value("taskscale_worker_cancels_seen_total", {"type": "long"})
        == 1
    )
    assert collect(r, keys)["types"]["long"]["completed"] == 1


def test_current_task_outside_a_task_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="only available inside a task function"):
        current_task()


def test_cli_cancel(
    redis_url: str,
    r: redis.Redis,
    keys: Keys,
    producer: Producer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TASKSCALE_REDIS_URL", redis_url)
    monkeypatch.setenv("TASKSCALE_NAMESPACE", keys.namespace)
    task_id = producer.enqueue("mail", 1)
    assert main(["cancel", task_id]) == 0
    assert "cancelled (queued mail, removed)" in capsys.readouterr().out
    assert main(["cancel", task_id]) == 3
    assert "not queued, delayed or running" in capsys.readouterr().out
    with pytest.raises(ValueError, match="invalid task id"):
        cancel('bad"id', client=r, keys=keys)


def test_a_cancelled_fan_out_sub_task_passes_its_slot_on(r: redis.Redis, keys: Keys) -> None:
    from taskscale.fanout import submit_fanout

    fan = submit_fanout(r, "resize", [[1], [2]], limit=1, keys=keys)
    [first] = [json.loads(e) for e in r.lrange(keys.queue("resize"), 0, -1)]
    assert first["args"] == [1] and r.llen(keys.fanout_pending(fan.id)) == 1
    assert cancel(first["id"], client=r, keys=keys).state == "queued"
    [second] = [json.loads(e) for e in r.lrange(keys.queue("resize"), 0, -1)]
    assert second["args"] == [2]  # released into the freed slot
    assert r.llen(keys.fanout_pending(fan.id)) == 0
    assert int(r.hget(keys.fanout(fan.id), "failed") or 0) == 1


def test_a_pending_sub_task_of_a_streamed_fan_out_is_cancelled_when_its_fan_out_is_named(
    redis_url: str,
    r: redis.Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from taskscale.fanout_stream import open_fanout

    stream = open_fanout(r, "resize", limit=1, collect=True, keys=keys)
    running, waiting, last = stream.add([[1], [2], [3]])
    assert r.llen(keys.fanout_pending(stream.id)) == 2
    # Not queued yet: without the fan-out id it is not found (and nothing changes).
    assert cancel(waiting, client=r, keys=keys).state == "unknown"
    result = cancel(waiting, client=r, keys=keys, fanout=stream.id)
    assert (result.state, result.where, result.removed) == ("pending", stream.id, True)
    assert [json.loads(e)["id"] for e in r.lrange(keys.fanout_pending(stream.id), 0, -1)] == [last]
    assert [json.loads(e)["id"] for e in r.lrange(keys.queue("resize"), 0, -1)] == [running]
    status = stream.status()
    assert (status.total, status.running, status.failed) == (3, 1, 1)  # no slot passed on
    assert stats(r, keys, "resize")["cancelled"] == 1
    assert stats(r, keys, "resize")["enqueued"] == 1  # only the released one
    [kept] = stream.results()
    assert (kept.index, kept.ok, kept.error_type) == (1, False, "Cancelled")
    # A released sub-task is found through its fan-out too (the fan-out names its type);
    # its slot passes on to the last one.
    assert cancel(running, client=r, keys=keys, fanout=stream.id).state == "queued"
    assert [json.loads(e)["id"] for e in r.lrange(keys.queue("resize"), 0, -1)] == [last]
    monkeypatch.setenv("TASKSCALE_REDIS_URL", redis_url)
    monkeypatch.setenv("TASKSCALE_NAMESPACE", keys.namespace)
    other = stream.add([[4]])[0]
    assert main(["cancel", other, "--fanout", stream.id]) == 0
    assert f"cancelled (pending in fan-out {stream.id}, removed)" in capsys.readouterr().out
    assert stream.close() is False  # `last` has not run
    assert cancel(last, client=r, keys=keys, fanout=stream.id).state == "queued"
    done = stream.wait(timeout=5, collect=True)
    assert (done.total, done.succeeded, done.failed) == (4, 0, 4)
    assert done.results is not None
    assert [s.error_type for s in done.results] == ["Cancelled"] * 4
    assert r.hget(keys.fanout(stream.id), "running") == b"0"
