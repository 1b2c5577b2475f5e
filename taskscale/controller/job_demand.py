"""How many Jobs a Job-mode TaskScaler creates now, pure.

Why it exists: KEDA's ScaledJob counts queued messages and creates Jobs for
them, so while a Job's pod waits for a node the same message is counted
again and another Job is created for it (KEDA #6157, #7329, #6727).  Here a
Job counts against the demand until its worker has claimed a task: every
active Job whose pod is not yet busy in the worker registry -- the Job has
no pod yet, its pod is Pending, or it runs but its worker has not claimed
(the registry records POD_NAME) -- is one task already provided for.  So

    new Jobs = min(queued + due - unclaimed Jobs, maxReplicas - active Jobs)

and a pod that never schedules never causes a second Job.  A worker that
claimed but has not heartbeated yet is still counted unclaimed while its
task has already left the queue: the error is one Job too few for one
pass, never one too many.

:class:`JobCensus` is what job_target.py read from the API (and the
registry); :func:`decide_jobs` turns it and an observation into the pass's
:class:`~taskscale.controller.types.Decision`, whose ``desired`` is the
number of active Jobs there should be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from taskscale.controller.rules.base import Pause
from taskscale.controller.types import Decision, Observation, ReasonCode, ScalingPolicy

#: Job phases, as ``taskscale_jobs{phase}`` and the status's ``jobs`` count them.
PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"
PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED)


@dataclass(frozen=True)
class JobState:
    """One Job of a scaler, as the API said: its name, whether it finished
    (and how), and the names of its pods."""

    name: str
    finished: str | None = None  #: None (active), SUCCEEDED or FAILED
    pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobCensus:
    """A scaler's Jobs by phase: ``pending`` (active, no busy worker yet:
    no pod, Pending, or starting), ``running`` (its worker runs a task),
    ``succeeded`` and ``failed`` (finished, kept by the history limits)."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    @property
    def active(self) -> int:
        """Jobs not finished: what counts against ``maxReplicas``."""
        return self.pending + self.running

    def as_dict(self) -> dict[str, int]:
        return {
            PENDING: self.pending,
            RUNNING: self.running,
            SUCCEEDED: self.succeeded,
            FAILED: self.failed,
        }


@runtime_checkable
class CountsJobs(Protocol):
    """An actuator of Jobs (job_target.JobActuator): the reconcile pass asks
    it for the census after reading its active Jobs."""

    def census(self, busy_by_pod: Mapping[str, int]) -> JobCensus: ...


def census_of(jobs: Iterable[JobState], busy_by_pod: Mapping[str, int]) -> JobCensus:
    """Count ``jobs`` by phase; an active Job is running when one of its pods
    runs a task by the registry (``busy_by_pod``), else pending."""
    counts = dict.fromkeys(PHASES, 0)
    for job in jobs:
        if job.finished is not None:
            counts[job.finished] += 1
        elif any(busy_by_pod.get(pod, 0) > 0 for pod in job.pods):
            counts[RUNNING] += 1
        else:
            counts[PENDING] += 1
    return JobCensus(**counts)


def waiting_tasks(observation: Observation) -> int:
    """Tasks of the scaler's types no worker has claimed: queued + due
    (due ones only while a scheduler lives to promote them), paused types none."""
    count_due = observation.schedulers_alive != 0
    return sum(
        t.queued + (t.due if count_due else 0) for t in observation.types.values() if not t.paused
    )


def decide_jobs(
    observation: Observation | None,
    policy: ScalingPolicy,
    census: JobCensus,
    *,
    pause: Pause | None = None,
) -> Decision:
    """The active Jobs there should be after this pass (``desired`` >= the
    active ones: Jobs are never deleted to scale down; they end by themselves)."""
    active = census.active
    details = {"activeJobs": float(active), "pendingJobs": float(census.pending)}
    if observation is None:
        return Decision(active, ReasonCode.FAIL_STATIC, "Redis unreadable: no Job created", details)
    if pause is not None:
        return Decision(active, ReasonCode.PAUSED, f"{pause.describe()}: no Job created", details)
    waiting = waiting_tasks(observation)
    wanted = max(0, waiting - census.pending)
    room = max(0, policy.max_replicas - active)
    new = min(wanted, room)
    details = {**details, "waitingTasks": float(waiting), "newJobs": float(new)}
    said = f"{waiting} task(s) waiting, {census.pending} Job(s) not started yet"
    if new < wanted:
        return Decision(
            active + new,
            ReasonCode.MAX_REPLICAS,
            f"{said}: {new} Job(s) created, held at maxReplicas {policy.max_replicas} active",
            details,
        )
    if new == 0:
        return Decision(active, ReasonCode.STEADY, f"{said}: no Job needed", details)
    return Decision(active + new, ReasonCode.DEMAND, f"{said}: {new} Job(s) created", details)
