"""The worker registry: what a running ``taskscale worker`` process records
about itself, how it stays fresh, and how it disappears when the worker dies.

The controller reads these records to know which pods are busy, and
``taskscale status`` prints them; both depend on a dead worker's record
vanishing by itself (TTL) and the reaper forgetting its lease.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
import redis
from registry_tasks import GATE

from support.waiting import wait_until
from support.workers import (
    kill,
    processes,
    run_taskscale,
    start_scheduler,
    start_worker,
    stop,
    text,
)
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = Keys("taskscale")
TASKS = ["registry_tasks"]


def _record(r: redis.Redis, worker_id: str) -> dict[str, str]:
    return {text(k): text(v) for k, v in r.hgetall(KEYS.worker(worker_id)).items()}


def _only_worker(r: redis.Redis) -> str:
    members: list[bytes] = wait_until(lambda: r.zrange(KEYS.workers, 0, -1))
    assert len(members) == 1
    return str(text(members[0]))


def _status(url: str, *flags: str) -> str:
    return run_taskscale(url, "status", *flags, check=True).stdout


def test_a_running_worker_records_its_id_pod_host_types_and_threads(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(
        redis_url,
        types="reg.gate,reg.work",
        imports=TASKS,
        threads=3,
        lease=5.0,
        env={"POD_NAME": "workers-7f9c-abcde"},
    )
    with processes(worker):
        worker_id = _only_worker(r)
        record = wait_until(lambda: _record(r, worker_id))
        pttl = r.pttl(KEYS.worker(worker_id))
        lease_expiry = r.zscore(KEYS.workers, worker_id)

    assert record["id"] == worker_id
    assert record["pod"] == "workers-7f9c-abcde"
    assert worker_id.startswith("workers-7f9c-abcde-")
    assert record["host"] == socket.gethostname()
    assert record["pid"] == str(worker.pid)
    assert record["types"] == "reg.gate,reg.work"
    assert (record["threads"], record["busy"]) == ("3", "0")
    assert int(record["started_ms"]) <= int(record["heartbeat_ms"])
    assert json.loads(record["stats"]) == {}
    assert 0 < pttl <= 5000
    assert lease_expiry is not None and lease_expiry > int(record["heartbeat_ms"])


def test_without_pod_name_the_host_name_stands_in(redis_url: str, r: redis.Redis) -> None:
    worker = start_worker(redis_url, types="reg.work", imports=TASKS, env={"POD_NAME": ""})
    with processes(worker):
        record = wait_until(lambda: _record(r, _only_worker(r)))
    assert record["pod"] == socket.gethostname()


def test_busy_shows_the_threads_running_tasks_and_falls_back_when_they_finish(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(redis_url, types="reg.gate", imports=TASKS, threads=3, heartbeat=0.3)
    with processes(worker):
        worker_id = _only_worker(r)
        producer = Producer(r, keys=KEYS)
        for _ in range(2):
            producer.enqueue("reg.gate")
        wait_until(lambda: _record(r, worker_id).get("busy") == "2")
        r.rpush(GATE, "open", "open")
        wait_until(lambda: _record(r, worker_id).get("busy") == "0")
        stats = wait_until(
            lambda: json.loads(_record(r, worker_id)["stats"]).get("reg.gate", {}).get("completed")
        )
    assert stats == 2


def test_per_type_counts_and_average_duration_are_recorded(redis_url: str, r: redis.Redis) -> None:
    worker = start_worker(redis_url, types="reg.work,reg.gate", imports=TASKS, heartbeat=0.3)
    with processes(worker):
        worker_id = _only_worker(r)
        producer = Producer(r, keys=KEYS)
        r.rpush(GATE, "open")
        producer.enqueue("reg.gate")
        for _ in range(3):
            producer.enqueue("reg.work")
        producer.enqueue("reg.work", fail=True, max_retries=0)

        def stats() -> dict[str, dict[str, float]] | None:
            found = json.loads(_record(r, worker_id).get("stats", "{}"))
            work = found.get("reg.work", {})
            return found if work.get("completed", 0) + work.get("failed", 0) == 4 else None

        found = wait_until(stats)
    assert (found["reg.work"]["completed"], found["reg.work"]["failed"]) == (3, 1)
    assert found["reg.work"]["avg_ms"] >= 45  # each run sleeps 50 ms
    assert (found["reg.gate"]["completed"], found["reg.gate"]["failed"]) == (1, 0)


def test_heartbeats_keep_the_record_alive_well_past_one_lease(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(redis_url, types="reg.work", imports=TASKS, lease=1.5, heartbeat=0.3)
    with processes(worker):
        worker_id = _only_worker(r)
        first = wait_until(lambda: _record(r, worker_id))
        time.sleep(4.0)  # more than two leases
        record = _record(r, worker_id)
    assert record, "the record expired while the worker was alive"
    assert int(record["heartbeat_ms"]) > int(first["heartbeat_ms"])
    assert record["started_ms"] == first["started_ms"]


def test_a_killed_workers_record_expires_and_the_reaper_forgets_it(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(redis_url, types="reg.work", imports=TASKS, lease=2.0, heartbeat=0.5)
    with processes(worker):
        worker_id = _only_worker(r)
        wait_until(lambda: _record(r, worker_id))
        kill(worker)
        wait_until(lambda: not r.exists(KEYS.worker(worker_id)), timeout=30)
        # The record expired by itself; the lease is still in the zset until a reaper runs.
        assert r.zscore(KEYS.workers, worker_id) is not None
        with processes(start_scheduler(redis_url, lease=2.0)):
            wait_until(lambda: r.zscore(KEYS.workers, worker_id) is None, timeout=30)
    assert json.loads(_status(redis_url, "--json"))["workers"] == []


def test_a_worker_stopped_gracefully_deregisters_at_once(redis_url: str, r: redis.Redis) -> None:
    worker = start_worker(redis_url, types="reg.work", imports=TASKS, lease=30.0)
    with processes(worker):
        worker_id = _only_worker(r)
        wait_until(lambda: _record(r, worker_id))
        stop(worker)
        assert worker.returncode == 0
        assert not r.exists(KEYS.worker(worker_id))
        assert r.zscore(KEYS.workers, worker_id) is None


def test_taskscale_status_lists_the_worker_with_its_pod_and_busy_threads(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(
        redis_url, types="reg.gate", imports=TASKS, threads=2, env={"POD_NAME": "pod-status-1"}
    )
    with processes(worker):
        worker_id = _only_worker(r)
        Producer(r, keys=KEYS).enqueue("reg.gate")
        wait_until(lambda: _record(r, worker_id).get("busy") == "1")
        table = _status(redis_url)
        doc = json.loads(_status(redis_url, "--json"))
        r.rpush(GATE, "open")
    assert worker_id in table and "pod-status-1" in table and "1/2" in table
    [entry] = doc["workers"]
    assert (entry["id"], entry["pod"], entry["types"]) == (worker_id, "pod-status-1", ["reg.gate"])
    assert (entry["busy"], entry["threads"]) == (1, 2)
