"""The TaskScaler status as a document: built from a pass's outcome, its
conditions merged with the previous ones, and compared without the idle
clock -- pure functions, no API calls (kube_status.py sends what they make).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskscale.controller.kube_client import rfc3339
from taskscale.controller.outcome import PassOutcome, Problem
from taskscale.controller.rules.no_scheduler import scheduler_alive
from taskscale.controller.rules.queue_wait import oldest_wait
from taskscale.controller.threads_check import check_threads
from taskscale.controller.types import Observation, ReasonCode


class EventReason:
    """Reasons of the Events the controller posts on a TaskScaler."""

    SCALED_UP = "ScaledUp"
    SCALED_DOWN = "ScaledDown"
    TARGET_NOT_FOUND = Problem.TARGET_NOT_FOUND
    REDIS_UNREACHABLE = Problem.REDIS_UNREACHABLE
    SCALE_FAILED = Problem.SCALE_FAILED
    INVALID_SPEC = "InvalidSpec"
    SECRET_UNAVAILABLE = "RedisSecretUnavailable"
    #: An unexpected error while registering the TaskScaler (a bug): the
    #: others go on; the message is the error's first line.
    REGISTRATION_FAILED = "RegistrationFailed"
    RECOVERED = "Recovered"
    #: tasksPerReplica differs from the threads the target's worker pods run.
    THREADS_MISMATCH = "TasksPerReplicaMismatch"
    #: ... and now they agree again.
    THREADS_MATCH = "TasksPerReplicaMatches"
    PAUSED = "Paused"
    RESUMED = "Resumed"
    #: A scale-down waits for the target's rollout (rules/rollout_hold.py) ...
    ROLLOUT_HOLD = ReasonCode.ROLLOUT_HOLD
    #: ... and no longer does.
    ROLLOUT_HOLD_ENDED = "RolloutHoldEnded"
    #: Job mode: a batch of Jobs created in one pass (one Event per batch).
    JOBS_CREATED = "JobsCreated"
    #: A worker pod's node is cordoned or tainted for removal: it claims nothing now.
    POD_DRAINING = "PodDraining"
    #: ... and its tasks ended: unmarked, its eviction may proceed.
    POD_DRAINED = "PodDrained"


class ConditionType:
    READY = "Ready"
    ACTIVE = "Active"
    REDIS_REACHABLE = "RedisReachable"
    #: tasksPerReplica equals the threads per pod of the target's live workers.
    THREADS_MATCH = "ThreadsMatch"
    PAUSED = "Paused"


def build_status(
    outcome: PassOutcome, previous: Mapping[str, Any], *, now: float
) -> dict[str, Any]:
    """The TaskScaler status after ``outcome``; fields a failed pass could not
    learn keep their previous values."""
    config = outcome.config
    status = dict(previous)
    status["observedGeneration"] = config.generation
    decision = outcome.decision
    if outcome.current is not None and decision is not None:
        status["currentReplicas"] = decision.desired if outcome.scaled else outcome.current
        status["desiredReplicas"] = decision.desired
        status["reason"] = decision.reason
        status["reasonCode"] = decision.reason_code
        status["rolloutHold"] = decision.reason_code == ReasonCode.ROLLOUT_HOLD
    if outcome.problem is not None:
        # The Reason and Message columns of `kubectl get tsc` read these two
        # fields: a failing scaler says why it fails there, not its last decision.
        status["reasonCode"] = outcome.problem
        status["reason"] = (
            f"{decision.reason} ({outcome.message})" if decision is not None else outcome.message
        )[:1024]
    if outcome.scaled:
        status["lastScaleTime"] = rfc3339(outcome.at)
    pause = config.pause
    status["paused"] = pause is not None
    status["pausedReplicas"] = pause.replicas if pause is not None else None
    if outcome.observation is not None:
        status["observations"] = observations_status(outcome.observation)
    if outcome.jobs is not None:  # Job mode: the Jobs by phase (job_demand.JobCensus)
        status["jobs"] = outcome.jobs.as_dict()
    if outcome.protection is not None:
        status["protectedPods"] = len(outcome.protection.protected)
        status["drainingPods"] = len(outcome.protection.draining)
    status["conditions"] = merge_conditions(
        previous.get("conditions") or [],
        conditions_for(outcome),
        now=now,
        generation=config.generation,
    )
    return status


def observations_status(observation: Observation) -> list[dict[str, Any]]:
    out = []
    alive = scheduler_alive(observation)  # due tasks wait on a scheduler, as in the rules
    for name, t in sorted(observation.types.items()):
        busy = bool(t.queued or t.due or t.active)
        idle: float | None
        if busy:
            idle = 0.0
        elif t.idle_since is None:
            idle = None
        else:
            idle = round(max(0.0, observation.at - t.idle_since), 1)
        out.append(
            {
                "type": name,
                "queued": t.queued,
                "due": t.due,
                "upcoming": t.upcoming,
                "active": t.active,
                "idleSeconds": idle,
                "idleSince": None if t.idle_since is None else rfc3339(t.idle_since),
                "oldestWaitSeconds": _rounded(oldest_wait(t, scheduler_alive=alive)),
            }
        )
    return out


def _rounded(wait: float | None) -> float | None:
    return round(wait) if wait is not None else None


def conditions_for(outcome: PassOutcome) -> list[dict[str, str]]:
    """Ready, RedisReachable and Active for one outcome."""
    if outcome.redis_error is None:
        redis = make_condition(ConditionType.REDIS_REACHABLE, "True", "Observed", "")
    else:
        redis = make_condition(
            ConditionType.REDIS_REACHABLE, "False", Problem.REDIS_UNREACHABLE, outcome.redis_error
        )
    if outcome.problem is None:
        ready = make_condition(ConditionType.READY, "True", "Reconciled", "")
    else:
        ready = make_condition(ConditionType.READY, "False", outcome.problem, outcome.message)
    pause = outcome.config.pause
    paused = (
        make_condition(ConditionType.PAUSED, "True", ReasonCode.PAUSED, pause.describe())
        if pause is not None
        else make_condition(ConditionType.PAUSED, "False", "NotPaused", "")
    )
    return [ready, redis, _active(outcome), paused, *_threads(outcome)]


def _threads(outcome: PassOutcome) -> list[dict[str, str]]:
    """ThreadsMatch, judged from the target's live workers; nothing (the
    condition keeps its last value) while none is live, e.g. at zero replicas."""
    if outcome.observation is None:
        return []
    check = check_threads(
        deployment=outcome.config.target,
        tasks_per_replica=outcome.config.policy.tasks_per_replica,
        workers=outcome.observation.workers,
    )
    if check is None:
        return []
    if check.matches:
        return [make_condition(ConditionType.THREADS_MATCH, "True", "Matches", check.message)]
    return [
        make_condition(
            ConditionType.THREADS_MATCH, "False", EventReason.THREADS_MISMATCH, check.message
        )
    ]


def _active(outcome: PassOutcome) -> dict[str, str]:
    decision = outcome.decision
    if decision is None or decision.reason_code == ReasonCode.FAIL_STATIC:
        why = outcome.message or "the target could not be read"
        return make_condition(ConditionType.ACTIVE, "Unknown", "Unknown", why)
    above_min = decision.desired > outcome.config.policy.min_replicas
    return make_condition(
        ConditionType.ACTIVE,
        "True" if above_min else "False",
        decision.reason_code,
        decision.reason,
    )


def make_condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message[:1024]}


def merge_conditions(
    previous: list[dict[str, Any]], new: list[dict[str, str]], *, now: float, generation: int
) -> list[dict[str, Any]]:
    """Conditions in a stable order; ``lastTransitionTime`` moves only when a
    condition's status changes.  Conditions not in ``new`` are kept."""
    before = {c.get("type"): c for c in previous}
    merged: dict[str, dict[str, Any]] = {str(k): dict(v) for k, v in before.items() if k}
    for condition in new:
        old = before.get(condition["type"])
        changed = old is None or old.get("status") != condition["status"]
        stamp = rfc3339(now) if changed or old is None else old.get("lastTransitionTime")
        merged[condition["type"]] = {
            **condition,
            "lastTransitionTime": stamp or rfc3339(now),
            "observedGeneration": generation,
        }
    order = [
        ConditionType.READY,
        ConditionType.ACTIVE,
        ConditionType.REDIS_REACHABLE,
        ConditionType.THREADS_MATCH,
    ]
    return [merged[k] for k in order if k in merged] + [
        v for k, v in merged.items() if k not in order
    ]


def ready_reason(status: Mapping[str, Any]) -> str | None:
    ready = condition_of(status, ConditionType.READY)
    if ready is None or ready.get("reason") is None:
        return None
    return str(ready["reason"])


def condition_of(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def status_differs(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` is worth a write over ``old`` (status updates only on change)."""
    return _comparable(new) != _comparable(old)


def _comparable(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status without the field that changes on every poll of an idle type
    (``idleSeconds``): a change of it alone does not justify a write."""
    out = dict(status)
    out["observations"] = [
        {k: v for k, v in o.items() if k not in ("idleSeconds", "oldestWaitSeconds")}
        for o in status.get("observations") or []
    ]
    return out
