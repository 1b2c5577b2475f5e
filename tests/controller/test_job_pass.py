"""A Job-mode scaler's reconcile pass against a real Redis, with an in-memory
Jobs actuator: the census of its Jobs decides (not the scaling rules), the
pass carries it to the reporters and the metrics, and a pass without Redis
creates nothing and does not overwrite the last Jobs shown."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pytest
import redis

from support.controller import enqueue, register_worker, start_tasks
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.job_demand import JobCensus, JobState, census_of
from taskscale.controller.job_spec import JobTarget
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings, RetrySettings
from taskscale.controller.types import ReasonCode, ScalingPolicy, TypePolicy
from taskscale.keys import Keys

pytestmark = pytest.mark.integration


@dataclass
class MemoryJobs:
    """Jobs in memory: created ones get a pod named after them."""

    jobs: list[JobState] = field(default_factory=list)

    def current_replicas(self) -> int:
        return sum(1 for j in self.jobs if j.finished is None)

    def census(self, busy_by_pod: Mapping[str, int]) -> JobCensus:
        return census_of(self.jobs, busy_by_pod)

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        for _ in range(replicas - self.current_replicas()):
            name = f"job-{len(self.jobs)}"
            self.jobs.append(JobState(name, pods=(f"{name}-pod",)))


CONFIG = ScalerConfig(
    name="renders",
    namespace="default",
    target="renders",
    redis=RedisRef(url="unused"),
    policy=ScalingPolicy(types=(TypePolicy("render"),), max_replicas=4),
    poll_interval_s=3600.0,
    jobs=JobTarget(spec={"template": {"spec": {"containers": [{"name": "w"}]}}}),
)
LABELS = {"namespace": "default", "name": "renders"}


@pytest.fixture
def reconciler() -> Iterator[Reconciler]:
    fast = RetrySettings(attempts=2, initial_s=0.01, max_s=0.02)
    settings = ReconcilerSettings(redis=fast, redis_timeout_s=0.5)
    rec = Reconciler(metrics=ControllerMetrics(), settings=settings)
    yield rec
    rec.close()


def test_jobs_follow_the_waiting_tasks_not_the_scaling_rules(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryJobs()
    reconciler.upsert(CONFIG, actuator=actuator, redis_url=redis_url)
    enqueue(r, keys, "render", 3)
    first = reconciler.reconcile_now(CONFIG.key)
    assert first.scaled and len(actuator.jobs) == 3
    assert first.jobs == JobCensus(pending=3)  # the Jobs just created, not started yet

    again = reconciler.reconcile_now(CONFIG.key)  # the pods wait: nothing more
    assert not again.scaled and len(actuator.jobs) == 3
    assert again.decision is not None and again.decision.reason_code == ReasonCode.STEADY

    # one worker claimed: its Job runs, and three new tasks get three Jobs,
    # held at maxReplicas 4 active (one running + two pending + one new)
    register_worker(r, keys, worker_id="w0", pod="job-0-pod", types="render", busy=1)
    start_tasks(r, keys, "render", 1)
    enqueue(r, keys, "render", 3)
    capped = reconciler.reconcile_now(CONFIG.key)
    assert capped.jobs == JobCensus(pending=3, running=1)  # after the one created
    assert capped.decision is not None and capped.decision.reason_code == ReasonCode.MAX_REPLICAS
    assert len(actuator.jobs) == 4
    sample = reconciler.metrics.sample
    assert sample("taskscale_jobs", {**LABELS, "phase": "running"}) == 1


def test_a_pass_without_redis_creates_no_job_and_keeps_the_last_census(
    reconciler: Reconciler, redis_url: str
) -> None:
    actuator = MemoryJobs([JobState("a", pods=("a-pod",))])
    dead = "redis://127.0.0.1:1/0"  # nothing listens there
    reconciler.upsert(CONFIG, actuator=actuator, redis_url=dead)
    outcome = reconciler.reconcile_now(CONFIG.key)
    assert outcome.decision is not None and outcome.decision.reason_code == ReasonCode.FAIL_STATIC
    assert outcome.jobs is None and len(actuator.jobs) == 1
    sample = reconciler.metrics.sample
    assert sample("taskscale_jobs", {**LABELS, "phase": "pending"}) is None
