"""End to end: a TaskScaler with ``source: celery`` drives a local pool of real
Celery workers -- from 0 to N when tasks are queued, held up while a long task
runs (ACTIVE_TASKS from the Celery integration), scaled down by stopping the
idle worker, never the busy one (the integration records each worker's pod),
back to 0 once idle."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import source_apps

from support.waiting import wait_until
from support.workers import pythonpath
from taskscale.controller.config import config_from_spec
from taskscale.controller.local import LocalPool, LocalPoolSettings
from taskscale.controller.outcome import PassOutcome
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings
from taskscale.keys import Keys

pytestmark = pytest.mark.integration
NAMESPACE = "taskscale"
#: The two long tasks' release lists (see source_apps.long).
KEYS = ("release-a", "release-b")


class Decisions:
    """Every pass's outcome, for assertions."""

    def __init__(self) -> None:
        self.outcomes: list[PassOutcome] = []
        self.lock = threading.Lock()

    def report(self, outcome: PassOutcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)

    def seen(self, *, queued: int | None = None, active: int | None = None) -> bool:
        """Whether some pass observed the type with these counts."""
        with self.lock:
            types = [o.observation.types["mail"] for o in self.outcomes if o.observation]
        return any(
            (queued is None or t.queued == queued) and (active is None or t.active == active)
            for t in types
        )

    def desired(self) -> list[int]:
        with self.lock:
            return [o.decision.desired for o in self.outcomes if o.decision is not None]


@pytest.fixture
def pool(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPool]:
    # the worker processes inherit these: the broker, the app module, the integration on
    monkeypatch.setenv("SOURCES_REDIS_URL", redis_url)
    monkeypatch.setenv("SOURCES_TRACKING", "1")
    monkeypatch.setenv("SOURCES_NAMESPACE", NAMESPACE)
    monkeypatch.setenv("PYTHONPATH", pythonpath())
    command = (sys.executable, "-m", "celery", "-A", "source_apps", "worker")
    command += ("-Q", source_apps.QUEUE, "--pool", "solo", "--loglevel", "INFO")
    command += ("--without-gossip", "--without-mingle", "--without-heartbeat")
    settings = LocalPoolSettings(
        types=("mail",), redis_url=redis_url, command=command, log_dir=tmp_path / "workers"
    )
    with LocalPool(settings) as p:
        yield p


@pytest.fixture
def celery_app(redis_url: str) -> Iterator[Any]:
    app = source_apps.make_app(redis_url)
    yield app
    app.close()


@pytest.mark.slow
def test_a_taskscaler_scales_celery_workers_from_zero_and_back_but_not_while_a_task_runs(
    pool: LocalPool, celery_app: Any, r: redis.Redis, redis_url: str
) -> None:
    spec = {
        "scaleTargetRef": {"name": "mail-workers"},
        "redis": {"url": redis_url, "namespace": NAMESPACE},
        "source": "celery",
        "taskTypes": [
            {
                "name": "mail",
                "queues": [source_apps.QUEUE],
                "tasks": [source_apps.LONG_TASK, source_apps.QUICK_TASK],
                "idleThresholdSeconds": 1,
            }
        ],
        "tasksPerReplica": 1,
        "maxReplicas": 3,
        "scaleDownStabilizationSeconds": 0,
        "pollIntervalSeconds": 0.3,
    }
    config = config_from_spec(spec, name="mail", namespace="local")
    decisions = Decisions()
    reconciler = Reconciler(reporter=decisions, settings=ReconcilerSettings(max_sleep_s=0.3))
    reconciler.upsert(config, actuator=pool, redis_url=redis_url)
    thread = threading.Thread(target=reconciler.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: decisions.desired(), what="a first pass")
        assert pool.current_replicas() == 0  # nothing queued: no worker

        for key in KEYS:
            celery_app.send_task(source_apps.LONG_TASK, args=(key,), queue=source_apps.QUEUE)
        wait_until(lambda: pool.current_replicas() == 2, timeout=60, what="2 Celery workers")
        wait_until(lambda: running(r) == 2, timeout=90, what="both long tasks running")
        # the queue, read while the workers started (Celery starts in seconds, a pass is 0.3 s)
        assert decisions.seen(queued=2) or decisions.seen(queued=1, active=1)
        wait_until(lambda: decisions.seen(queued=0, active=2), what="2 in flight observed")

        pods = {k: wait_until(lambda k=k: r.get(f"{k}:pod"), what=f"{k}'s pod") for k in KEYS}
        assert sorted(p.decode() for p in pods.values()) == sorted(pool.worker_names())
        # keep the task on the newest worker: the one a busy-blind pool would stop first
        newest = pool.worker_names()[-1]
        kept = next(k for k in KEYS if pods[k].decode() == newest)
        freed = next(k for k in KEYS if k != kept)
        r.rpush(freed, 1)
        wait_until(lambda: r.get(f"{freed}:ended") == b"1", timeout=60, what="one task ended")
        wait_until(lambda: pool.current_replicas() == 1, timeout=60, what="scale 2 -> 1")
        assert pool.worker_names() == [newest]  # the idle worker was the one stopped
        assert pool.draining_names() in ([pods[freed].decode()], [])
        # idle threshold 1 s, a pass every 0.3 s: long enough to have scaled to zero
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert pool.worker_names() == [newest]
            assert running(r) == 1 and r.get(f"{kept}:ended") is None  # never interrupted
            time.sleep(0.1)
        assert 0 not in decisions.desired()[-10:]

        r.rpush(kept, 1)
        wait_until(lambda: pool.current_replicas() == 0, timeout=60, what="back to 0")
        wait_until(lambda: not pool.draining_names(), timeout=60, what="workers exited")
        assert running(r) == 0
        assert r.llen("release-a") == r.llen("release-b") == 0  # both tasks ran to the end
        assert r.mget([f"{k}:ended" for k in KEYS]) == [b"1", b"1"]
        assert pool.unexpected_exits == 0
    finally:
        reconciler.stop()
        thread.join(10)
        reconciler.close()


def running(r: redis.Redis) -> int:
    value = r.hget(Keys(NAMESPACE).active, source_apps.LONG_TASK)
    return int(value or 0)


def test_a_pool_runs_the_given_command_instead_of_taskscale_worker(redis_url: str) -> None:
    command = (sys.executable, "-m", "celery", "worker")
    settings = LocalPoolSettings(types=("mail",), redis_url=redis_url, command=command)
    assert LocalPool(settings).command() == list(command)
    with pytest.raises(ValueError, match="command must not be empty"):
        LocalPoolSettings(types=("mail",), redis_url=redis_url, command=())
