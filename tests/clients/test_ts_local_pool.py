"""The local-pool autoscaler (the controller's loop on local processes, as
``taskscale demo`` runs it) scales TypeScript workers like Python ones:
from zero when tasks are queued, one worker per task, and back to zero once
the type is idle, each stopped by SIGTERM and exiting cleanly."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from support.counters import active, stat
from support.node_client import EXAMPLES, built_client, worker_command
from support.waiting import wait_until
from taskscale.controller.config import config_from_spec
from taskscale.controller.local import LocalPool, LocalPoolSettings
from taskscale.controller.outcome import PassOutcome
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Desired:
    """Every pass's desired replicas."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.lock = threading.Lock()

    def report(self, outcome: PassOutcome) -> None:
        if outcome.decision is not None:
            with self.lock:
                self.values.append(outcome.decision.desired)


@pytest.fixture
def pool(redis_url: str, keys: Keys, tmp_path: Path) -> Iterator[LocalPool]:
    built_client()
    command = worker_command(
        EXAMPLES, "sleep", concurrency=1, heartbeat=0.5, grace=5, idle_wait=0.5
    )
    settings = LocalPoolSettings(
        types=("sleep",),
        redis_url=redis_url,
        namespace=keys.namespace,
        command=tuple(command),
        log_dir=tmp_path / "workers",
        python=sys.executable,
    )
    with LocalPool(settings) as p:
        yield p


def test_the_local_pool_scales_typescript_workers_from_zero_and_back(
    pool: LocalPool, redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    spec = {
        "scaleTargetRef": {"name": "ts-workers"},
        "redis": {"url": redis_url, "namespace": keys.namespace},
        "taskTypes": [{"name": "sleep", "idleThresholdSeconds": 1}],
        "tasksPerReplica": 1,
        "maxReplicas": 2,
        "scaleDownStabilizationSeconds": 0,
        "pollIntervalSeconds": 0.3,
    }
    desired = Desired()
    reconciler = Reconciler(reporter=desired, settings=ReconcilerSettings(max_sleep_s=0.3))
    reconciler.upsert(
        config_from_spec(spec, name="ts", namespace="local"), actuator=pool, redis_url=redis_url
    )
    thread = threading.Thread(target=reconciler.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: desired.values, what="a first pass")
        assert pool.current_replicas() == 0  # nothing queued: no worker

        producer.enqueue_many("sleep", [[1.5], [1.5]])
        wait_until(lambda: pool.current_replicas() == 2, timeout=30, what="2 TS workers")
        registered = wait_until(
            lambda: len(ids := [w.decode() for w in r.zrange(keys.workers, 0, -1)]) == 2 and ids,
            timeout=30,
            what="both registered",
        )
        names = pool.worker_names()
        assert sorted(w.rsplit("-", 2)[0] for w in registered) == sorted(names)  # POD_NAME
        wait_until(lambda: active(r, keys, "sleep") == 2, timeout=30, what="one task each")

        wait_until(lambda: stat(r, keys, "sleep", "completed") == 2, timeout=30, what="done")
        wait_until(lambda: pool.current_replicas() == 0, timeout=30, what="back to 0")
        wait_until(lambda: not pool.draining_names(), timeout=30, what="workers exited")
        assert pool.unexpected_exits == 0
        assert r.zcard(keys.workers) == 0 and active(r, keys, "sleep") == 0
        assert 0 in desired.values and 2 in desired.values
    finally:
        reconciler.stop()
        thread.join(10)
        reconciler.close()  # its demand listener too
