"""Real ``rq worker -w taskscale.integrations.rq.TrackingWorker`` processes
keep ACTIVE_TASKS / IDLE_SINCE: exact while jobs run (in forked horses), 0
after, never negative; failures count down; a worker killed with its horse
is reaped by a live one; the type is the job's function or its queue."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from library_workers import WorkerProcess, broker_url, rq_worker
from rq import Queue
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation

from support.counters import active, stat
from support.waiting import wait_until
from taskscale.controller.observer import ObserveRequest
from taskscale.controller.sharded import observer_for
from taskscale.controller.source_spec import TypeSource
from taskscale.controller.types import busy_by_pod
from taskscale.keys import Keys

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BLOCK = "rq_jobs.block"
FAIL = "rq_jobs.block_then_fail"


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


@pytest.fixture
def broker(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(broker_url(redis_url))
    yield client
    client.close()


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1e6


def stop_job(broker: redis.Redis, job_id: str) -> bool:
    """Ask the worker to kill the horse running ``job_id``; False if it runs no horse yet."""
    try:
        send_stop_job_command(broker, job_id)
    except InvalidJobOperation:  # counted before RQ marks it started
        return False
    return True


def test_running_jobs_are_counted_exactly_and_idle_since_is_stamped(
    r: redis.Redis, broker: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    queue = Queue("q", connection=broker)
    workers = [
        rq_worker(redis_url=redis_url, keys=keys, log=tmp_path / f"w{i}.log", queue="q")
        for i in range(3)
    ]
    for i, w in enumerate(workers):
        w.env["POD_NAME"] = f"rq-pod-{i}"
    with contextlib.ExitStack() as stack:
        for w in workers:
            stack.enter_context(w).start(r)
        for _ in range(4):  # 3 workers: 3 run, 1 waits in the queue
            queue.enqueue(BLOCK, "release", result_ttl=0)
        wait_until(lambda: active(r, keys, BLOCK) == 3, timeout=30)
        time.sleep(1.0)  # and no more than the 3 that run
        assert active(r, keys, BLOCK) == 3
        assert r.hget(keys.idle_since, BLOCK) is None
        # each job runs in a forked horse, which names its worker's pod: the
        # controller's observer sees three busy pods, as it sees taskscale's
        source = TypeSource("block", "rq", ("q",), (BLOCK,))
        request = ObserveRequest(types=("block",), lead_s=0, sources=(source,))
        seen = observer_for(r, keys.namespace).observe({"s": request})["s"]
        assert busy_by_pod(seen.workers) == {f"rq-pod-{i}": 1 for i in range(3)}
        r.rpush("release", *["go"] * 4)
        wait_until(lambda: stat(r, keys, BLOCK, "completed") == 4, timeout=30)
        assert active(r, keys, BLOCK) == 0
        idle = float(r.hget(keys.idle_since, BLOCK) or 0)
        assert redis_now(r) - 30 < idle <= redis_now(r)
        assert stat(r, keys, BLOCK, "claimed") == 4
        assert stat(r, keys, BLOCK, "failed") == 0
        assert stat(r, keys, BLOCK, "active_underflow") == 0
        assert [w.stop() for w in workers] == [0, 0, 0]
    assert r.zcard(keys.tracked_processes) == 0  # each left as it stopped


def test_a_failing_job_counts_down_as_failed_and_sigterm_waits_for_the_job(
    r: redis.Redis, broker: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    queue = Queue("q", connection=broker)
    with rq_worker(redis_url=redis_url, keys=keys, log=tmp_path / "w.log", queue="q") as w:
        w.start(r)
        job = queue.enqueue(FAIL, "release")
        wait_until(lambda: active(r, keys, FAIL) == 1, timeout=30)
        assert w.process is not None
        w.process.send_signal(signal.SIGTERM)  # warm shutdown: the job may finish
        time.sleep(0.5)
        assert active(r, keys, FAIL) == 1
        r.rpush("release", "go")
        assert w.stop() == 0
        assert job.get_status(refresh=True) == "failed"
        assert active(r, keys, FAIL) == 0
        assert stat(r, keys, FAIL, "failed") == 1
        assert stat(r, keys, FAIL, "completed") == 0
        assert r.hget(keys.idle_since, FAIL) is not None


def test_a_killed_workers_job_is_counted_down_by_a_live_worker(
    r: redis.Redis, broker: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    lease = 2.0
    killed = rq_worker(
        redis_url=redis_url, keys=keys, log=tmp_path / "a.log", queue="a", lease_s=lease
    )
    survivor = rq_worker(
        redis_url=redis_url, keys=keys, log=tmp_path / "b.log", queue="b", lease_s=lease
    )
    with killed, survivor:
        killed.start(r)
        Queue("a", connection=broker).enqueue(BLOCK, "never")
        wait_until(lambda: active(r, keys, BLOCK) == 1, timeout=30)
        assert killed.stop(signal.SIGKILL) == -signal.SIGKILL  # the worker and its horse
        time.sleep(lease + 1)
        assert active(r, keys, BLOCK) == 1  # nobody alive to reap: still counted
        survivor.start(r)  # an idle worker joins (as a replacement pod would) ...
        wait_until(lambda: active(r, keys, BLOCK) == 0, timeout=30)  # ... and reaps
        assert r.hget(keys.idle_since, BLOCK) is not None
        assert r.zcard(keys.tracked_processes) == 1
        assert stat(r, keys, BLOCK, "active_underflow") == 0


def test_jobs_can_count_as_their_queue(
    r: redis.Redis, broker: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    w: WorkerProcess = rq_worker(
        redis_url=redis_url,
        keys=keys,
        log=tmp_path / "w.log",
        queue="emails",
        worker_class="rq_jobs.ByQueueWorker",
    )
    with w:
        w.start(r)
        Queue("emails", connection=broker).enqueue(BLOCK, "release")
        wait_until(lambda: active(r, keys, "emails") == 1, timeout=30)
        assert active(r, keys, BLOCK) == 0
        r.rpush("release", "go")
        wait_until(lambda: stat(r, keys, "emails", "completed") == 1, timeout=30)
        assert active(r, keys, "emails") == 0


def test_a_stopped_job_and_a_cold_shutdown_count_down(
    r: redis.Redis, broker: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    queue = Queue("q", connection=broker)
    with rq_worker(redis_url=redis_url, keys=keys, log=tmp_path / "w.log", queue="q") as w:
        w.start(r)
        stopped = queue.enqueue(BLOCK, "never")
        wait_until(lambda: active(r, keys, BLOCK) == 1, timeout=30)
        wait_until(lambda: stop_job(broker, stopped.id), timeout=30)  # the worker kills its horse
        wait_until(lambda: stat(r, keys, BLOCK, "failed") == 1, timeout=30)
        assert active(r, keys, BLOCK) == 0
        queue.enqueue(BLOCK, "never")
        wait_until(lambda: active(r, keys, BLOCK) == 1, timeout=30)
        assert w.process is not None
        w.process.send_signal(signal.SIGTERM)  # warm shutdown waits for the job ...
        time.sleep(1.5)  # (RQ ignores a second signal within 1 s)
        assert active(r, keys, BLOCK) == 1
        w.stop(signal.SIGTERM)  # ... a second SIGTERM kills the horse: cold shutdown
        assert active(r, keys, BLOCK) == 0
        assert r.zcard(keys.tracked_processes) == 0  # it left, nothing to reap


def test_the_simple_worker_counts_in_the_workers_own_redis_by_default(
    r: redis.Redis, broker: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    w = rq_worker(
        redis_url=redis_url,
        keys=keys,
        log=tmp_path / "w.log",
        queue="q",
        worker_class="taskscale.integrations.rq.TrackingSimpleWorker",
    )
    del w.env["TASKSCALE_REDIS_URL"]  # the hashes go where the queue is: `--url`
    with w:
        w.start(broker)
        Queue("q", connection=broker).enqueue(BLOCK, "release")
        wait_until(lambda: active(broker, keys, BLOCK) == 1, timeout=30)
        assert w.children() == []  # no horse: the job runs in the worker process
        assert not r.exists(keys.active)
        r.rpush("release", "go")
        wait_until(lambda: stat(broker, keys, BLOCK, "completed") == 1, timeout=30)
        assert active(broker, keys, BLOCK) == 0
        assert broker.hget(keys.idle_since, BLOCK) is not None
