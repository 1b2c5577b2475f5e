"""The local actuator runs real ``taskscale worker`` processes: they register
under their POD_NAME, scale-down stops idle ones first, nothing outlives
stop_all."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from support.waiting import wait_until
from taskscale.controller.local import LocalPool, LocalPoolSettings
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.types import WorkerObservation, busy_by_pod
from taskscale.demo.localredis import LocalRedis
from taskscale.keys import Keys

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T = TypeVar("T")
WAIT_S = 60.0


def wait_for(what: str, probe: Callable[[], T | None]) -> T:
    """Poll ``probe`` every 0.1 s until truthy, at most WAIT_S seconds."""
    return wait_until(probe, timeout=WAIT_S, interval=0.1, what=what)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


@pytest.fixture
def pool(redis_url: str, keys: Keys, tmp_path: Path) -> Iterator[LocalPool]:
    settings = LocalPoolSettings(
        types=("sleep",),
        redis_url=redis_url,
        namespace=keys.namespace,
        threads=1,
        imports=("taskscale.examples",),
        extra_args=("--grace", "2", "--heartbeat", "0.5"),
        log_dir=tmp_path / "logs",
    )
    with LocalPool(settings) as p:
        yield p


def enqueue_sleep(r: redis.Redis, keys: Keys, seconds: float) -> None:
    """Enqueue with the plain commands docs/schema.md gives for other languages."""
    envelope = {
        "id": uuid.uuid4().hex,
        "type": "sleep",
        "args": [],
        "kwargs": {"seconds": seconds},
        "priority": 5,
        "attempts": 0,
        "max_retries": 0,
    }
    pipe = r.pipeline(transaction=True)
    pipe.rpush(keys.queue("sleep", 5), json.dumps(envelope))
    pipe.sadd(keys.types, "sleep")
    pipe.hincrby(keys.stats("sleep"), "enqueued", 1)
    pipe.rpush(keys.wake("sleep"), 1)
    pipe.ltrim(keys.wake("sleep"), -64, -1)
    pipe.publish(keys.demand_channel, "sleep")
    pipe.execute()


def registered(r: redis.Redis, keys: Keys) -> tuple[WorkerObservation, ...]:
    return Observer(r, keys).observe({"s": ObserveRequest(("sleep",), 0)})["s"].workers


def test_scale_up_from_zero_starts_workers_that_register_under_their_names(
    pool: LocalPool, r: redis.Redis, keys: Keys
) -> None:
    assert pool.current_replicas() == 0

    pool.scale(2, busy_by_pod={})

    assert pool.current_replicas() == 2
    workers = wait_for("2 registered workers", lambda: len(registered(r, keys)) == 2)
    assert workers
    pods = {w.pod for w in registered(r, keys)}
    assert pods == set(pool.worker_names())
    assert all(w.types == ("sleep",) and w.threads == 1 for w in registered(r, keys))


def test_scale_down_stops_idle_workers_and_keeps_the_busy_ones(
    pool: LocalPool, r: redis.Redis, keys: Keys
) -> None:
    # 4 one-thread workers, 2 of them busy: keeping the busy pair by chance
    # (instead of by busy_by_pod) would happen 1 time in 6.
    pool.scale(4, busy_by_pod={})
    wait_for("4 registered workers", lambda: len(registered(r, keys)) == 4)
    enqueue_sleep(r, keys, 60)
    enqueue_sleep(r, keys, 60)

    def two_busy() -> set[str] | None:
        pods = {w.pod for w in registered(r, keys) if w.busy > 0}
        return pods if len(pods) == 2 else None

    busy = wait_for("2 busy workers", two_busy)

    pool.scale(2, busy_by_pod=busy_by_pod(registered(r, keys)))

    assert set(pool.worker_names()) == busy
    assert pool.current_replicas() == 2
    wait_for("the idle workers to exit", lambda: not pool.draining_names())
    assert {w.pod for w in registered(r, keys)} == busy


def test_stop_all_leaves_no_worker_process_and_no_live_registration(
    pool: LocalPool, r: redis.Redis, keys: Keys
) -> None:
    pool.scale(3, busy_by_pod={})
    wait_for("3 registered workers", lambda: len(registered(r, keys)) == 3)
    enqueue_sleep(r, keys, 60)  # one drains past its grace
    pids = pool.pids()

    pool.stop_all(timeout=30)

    assert pool.pids() == []
    assert pool.current_replicas() == 0
    assert not any(alive(pid) for pid in pids)
    assert registered(r, keys) == ()


def test_the_redis_url_reaches_workers_by_environment_not_argv(
    pool: LocalPool, r: redis.Redis, keys: Keys, redis_url: str
) -> None:
    pool.scale(1, busy_by_pod={})
    wait_for("a registered worker", lambda: registered(r, keys))

    cmdline = Path(f"/proc/{pool.pids()[0]}/cmdline").read_bytes().decode()
    assert "redis://" not in cmdline
    assert redis_url not in cmdline


def test_a_worker_that_dies_is_reaped_and_no_longer_counted(
    pool: LocalPool, r: redis.Redis, keys: Keys
) -> None:
    pool.scale(2, busy_by_pod={})
    victim = pool.pids()[0]

    os.kill(victim, signal.SIGKILL)

    wait_for("the dead worker to be reaped", lambda: pool.current_replicas() == 1)
    assert victim not in pool.pids()
    assert pool.unexpected_exits == 1
    pool.scale(2, busy_by_pod={})
    assert pool.current_replicas() == 2


def test_workers_write_their_output_to_the_log_dir(pool: LocalPool, tmp_path: Path) -> None:
    pool.scale(1, busy_by_pod={})
    name = pool.worker_names()[0]
    log_file = tmp_path / "logs" / f"{name}.log"

    wait_for("worker output", lambda: log_file.exists() and log_file.stat().st_size > 0)


def test_local_redis_starts_a_server_and_removes_it_on_stop() -> None:
    server = LocalRedis().start()
    pid = server.pid
    assert pid is not None
    try:
        client = redis.Redis.from_url(server.url)
        assert client.ping()
        client.close()
    finally:
        server.stop()

    assert not alive(pid)
