"""How many Jobs a Job-mode scaler creates: one per task waiting (queued +
due) minus the Jobs whose worker has not claimed yet, never more than
maxReplicas active -- so a Job whose pod waits for a node never gets a twin."""

from __future__ import annotations

from taskscale.controller.job_demand import JobCensus, JobState, census_of, decide_jobs
from taskscale.controller.rules.base import Pause
from taskscale.controller.types import (
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
)

POLICY = ScalingPolicy(types=(TypePolicy("render"), TypePolicy("mail")), max_replicas=5)


def seen(
    queued: int = 0, due: int = 0, *, schedulers: int | None = 1, paused: bool = False
) -> Observation:
    return Observation(
        at=0.0,
        types={
            "render": TypeObservation("render", queued=queued, due=due, paused=paused),
            "mail": TypeObservation("mail"),
        },
        schedulers_alive=schedulers,
    )


def test_a_census_counts_claimed_jobs_as_running_and_the_rest_as_pending() -> None:
    jobs = [
        JobState("a"),  # no pod yet
        JobState("b", pods=("b-1",)),  # a pod, not in the registry: Pending or starting
        JobState("c", pods=("c-1",)),  # registered, idle: not claimed yet
        JobState("d", pods=("d-1", "d-2")),  # a retried pod that claimed
        JobState("e", finished="succeeded", pods=("e-1",)),
        JobState("f", finished="failed"),
    ]
    census = census_of(jobs, {"c-1": 0, "d-2": 1, "e-1": 1})
    assert census == JobCensus(pending=3, running=1, succeeded=1, failed=1)
    assert census.active == 4


def test_one_job_per_waiting_task_at_first() -> None:
    decision = decide_jobs(seen(queued=3, due=2), POLICY, JobCensus())
    assert (decision.desired, decision.reason_code) == (5, ReasonCode.DEMAND)


def test_jobs_not_started_yet_are_not_created_again() -> None:
    # five tasks, five Jobs whose pods wait for a node: nothing more, pass after pass
    for _ in range(3):
        decision = decide_jobs(seen(queued=5), POLICY, JobCensus(pending=5))
        assert (decision.desired, decision.reason_code) == (5, ReasonCode.STEADY)


def test_running_jobs_took_their_tasks_out_of_the_queue() -> None:
    # 2 of 5 claimed (queue down to 3), 3 pending: no new Job
    assert decide_jobs(seen(queued=3), POLICY, JobCensus(pending=3, running=2)).desired == 5
    # two more tasks arrive: two more Jobs
    assert decide_jobs(seen(queued=5), POLICY, JobCensus(pending=3, running=0)).desired == 5
    assert decide_jobs(seen(queued=5), POLICY, JobCensus(pending=3, running=2)).desired == 5


def test_never_more_than_max_replicas_active() -> None:
    decision = decide_jobs(seen(queued=9), POLICY, JobCensus(running=2))
    assert (decision.desired, decision.reason_code) == (5, ReasonCode.MAX_REPLICAS)
    full = decide_jobs(seen(queued=9), POLICY, JobCensus(running=5))
    assert full.desired == 5


def test_finished_jobs_do_not_count() -> None:
    decision = decide_jobs(seen(queued=2), POLICY, JobCensus(succeeded=7, failed=3))
    assert decision.desired == 2


def test_due_tasks_wait_for_a_scheduler_and_paused_types_for_a_resume() -> None:
    assert decide_jobs(seen(queued=1, due=4, schedulers=0), POLICY, JobCensus()).desired == 1
    assert decide_jobs(seen(queued=3, paused=True), POLICY, JobCensus()).desired == 0


def test_no_observation_or_a_pause_creates_nothing() -> None:
    census = JobCensus(pending=1, running=1)
    held = decide_jobs(None, POLICY, census)
    assert (held.desired, held.reason_code) == (2, ReasonCode.FAIL_STATIC)
    paused = decide_jobs(seen(queued=4), POLICY, census, pause=Pause())
    assert (paused.desired, paused.reason_code) == (2, ReasonCode.PAUSED)
