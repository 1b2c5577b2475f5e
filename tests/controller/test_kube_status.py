"""How a reconcile outcome becomes TaskScaler status: which fields move,
when a condition's transition time moves, and what counts as a change."""

from __future__ import annotations

from typing import Any

from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.kube import build_status, rfc3339, status_differs
from taskscale.controller.reconciler import PassOutcome, Problem
from taskscale.controller.status_doc import observations_status
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
)

CONFIG = ScalerConfig(
    name="emails",
    namespace="jobs",
    target="email-worker",
    redis=RedisRef(url="redis://r"),
    policy=ScalingPolicy(types=(TypePolicy("email"),)),
    generation=3,
)
OBS = Observation(at=1000.0, types={"email": TypeObservation("email", idle_since=900.0)})


def outcome(**changes: Any) -> PassOutcome:
    base: dict[str, Any] = {
        "config": CONFIG,
        "at": 1000.0,
        "observation": OBS,
        "current": 2,
        "decision": Decision(0, ReasonCode.IDLE, "2 -> 0: all types idle for 300 s"),
        "scaled": True,
    }
    base.update(changes)
    return PassOutcome(**base)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_scale_sets_replicas_reason_scale_time_and_observations() -> None:
    status = build_status(outcome(), {}, now=1000.0)
    assert (status["currentReplicas"], status["desiredReplicas"]) == (0, 0)
    assert status["reasonCode"] == "Idle"
    assert status["reason"] == "2 -> 0: all types idle for 300 s"
    assert status["lastScaleTime"] == rfc3339(1000.0)
    assert status["observedGeneration"] == 3
    assert status["observations"] == [
        {
            "type": "email",
            "queued": 0,
            "due": 0,
            "upcoming": 0,
            "active": 0,
            "idleSeconds": 100.0,
            "idleSince": rfc3339(900.0),
            "oldestWaitSeconds": None,
        }
    ]
    c = conditions(status)
    assert (c["Ready"]["status"], c["RedisReachable"]["status"]) == ("True", "True")
    assert c["Active"]["status"] == "False"  # at minReplicas


def test_oldest_wait_leaves_due_tasks_out_while_no_scheduler_can_promote_them() -> None:
    waiting = TypeObservation("email", queued=1, due=1, oldest_ready_s=12.4, oldest_due_s=90.0)
    with_scheduler = Observation(at=1000.0, types={"email": waiting}, schedulers_alive=1)
    without = Observation(at=1000.0, types={"email": waiting}, schedulers_alive=0)
    (seen,) = observations_status(with_scheduler)
    (stranded,) = observations_status(without)
    assert (seen["oldestWaitSeconds"], stranded["oldestWaitSeconds"]) == (90, 12)


def test_a_missing_target_keeps_the_last_known_replicas_and_flags_ready_false() -> None:
    before = build_status(outcome(), {}, now=1000.0)
    failed = outcome(
        current=None,
        decision=None,
        scaled=False,
        problem=Problem.TARGET_NOT_FOUND,
        message="deployment jobs/x not found",
    )
    status = build_status(failed, before, now=1010.0)
    assert status["currentReplicas"] == 0 and status["lastScaleTime"] == rfc3339(1000.0)
    c = conditions(status)
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "TargetNotFound"
    assert c["Ready"]["lastTransitionTime"] == rfc3339(1010.0)
    assert c["Active"]["status"] == "Unknown"


def test_transition_time_moves_only_when_a_condition_changes_status() -> None:
    first = build_status(outcome(), {}, now=1000.0)
    again = build_status(outcome(scaled=False), first, now=2000.0)
    assert conditions(again)["Ready"]["lastTransitionTime"] == rfc3339(1000.0)
    down = build_status(
        outcome(
            observation=None,
            redis_error="ConnectionError",
            problem=Problem.REDIS_UNREACHABLE,
            message="ConnectionError",
            scaled=False,
            decision=Decision(2, ReasonCode.FAIL_STATIC, "2 -> 2: Redis could not be read"),
        ),
        again,
        now=3000.0,
    )
    c = conditions(down)
    assert c["RedisReachable"]["status"] == "False"
    assert c["RedisReachable"]["lastTransitionTime"] == rfc3339(3000.0)
    assert down["observations"] == first["observations"]  # not overwritten by nothing


def test_idle_seconds_growing_alone_is_not_a_status_change() -> None:
    first = build_status(outcome(scaled=False), {}, now=1000.0)
    later_obs = Observation(at=1030.0, types=OBS.types)
    later = build_status(outcome(scaled=False, observation=later_obs), first, now=1030.0)
    assert later["observations"][0]["idleSeconds"] == 130.0
    assert not status_differs(later, first)
    busy = Observation(at=1030.0, types={"email": TypeObservation("email", queued=1)})
    changed = build_status(outcome(scaled=False, observation=busy), first, now=1030.0)
    assert status_differs(changed, first)


def test_the_status_helpers_keep_their_old_import_path() -> None:
    # they were defined in kube.py before the status document moved out
    from taskscale.controller import kube, status_doc

    for name in ("observations_status", "conditions_for", "merge_conditions"):
        assert getattr(kube, name) is getattr(status_doc, name)
        assert name in kube.__all__
