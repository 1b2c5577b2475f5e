"""The StatefulSet ordinal hold (ordinal_hold.py), pure, and how the reconcile
pass applies it to a StatefulSet target only."""

from __future__ import annotations

from typing import Any

import pytest
from rulefacts import facts, observation, policy

from support.controller import MemoryActuator
from taskscale.controller.config import config_from_object
from taskscale.controller.history import History
from taskscale.controller.reconcile_pass import _decide
from taskscale.controller.rules import ordinal_hold
from taskscale.controller.rules.base import Step
from taskscale.controller.scaler_state import ScalerState
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    TypeObservation,
    WorkerObservation,
)

IDLE = Step(0, ReasonCode.IDLE, "all types idle for 300 s")


def hold(given: Step, busy: dict[str, int], *, current: int = 3, most: int = 10) -> Step:
    """The ordinal hold of StatefulSet "email-worker" applied to ``given``, with
    one worker process on each pod of ``busy`` running that many tasks."""
    workers = tuple(
        WorkerObservation(f"w{i}", pod, ("a",), threads=max(1, tasks), busy=tasks)
        for i, (pod, tasks) in enumerate(busy.items())
    )
    settings = facts(
        observation(workers, a={"active": sum(busy.values())}),
        policy(max_replicas=most),
        current=current,
        statefulset="email-worker",
    )
    return ordinal_hold.apply(settings, given)


def held(given: Step, busy: dict[str, int], *, current: int = 3, most: int = 10) -> Decision:
    return hold(given, busy, current=current, most=most).decision(current)


@pytest.mark.parametrize(
    ("pod", "tasks"),
    [
        ("email-worker-0", 0),  # idle
        ("email-worker-extra-7", 3),  # another StatefulSet's pod
        ("email-worker-5c8d9-x2x4q", 2),  # a Deployment's pod
        ("email-worker-04", 1),  # no ordinal is written with a leading zero
        ("email-worker-", 1),
    ],
)
def test_a_pod_not_the_stateful_sets_or_idle_holds_nothing(pod: str, tasks: int) -> None:
    assert hold(IDLE, {pod: tasks}, current=10) is IDLE


def test_only_the_stateful_sets_own_busy_pods_count() -> None:
    busy = {
        "email-worker-2": 1,
        "email-worker-0": 0,  # idle
        "email-worker-extra-7": 3,  # another StatefulSet's pod
        "email-worker-5c8d9-x2x4q": 2,  # a Deployment's pod
        "email-worker-04": 1,  # no ordinal is written with a leading zero
        "email-worker-": 1,
    }
    # the highest busy ordinal is 2, on email-worker-2: the floor is 3
    decision = held(IDLE, busy, current=10)
    assert (decision.desired, decision.reason_code) == (3, ReasonCode.HOLD_ACTIVE)
    assert "keeping 3: pod email-worker-2 (ordinal 2) runs a task" in decision.reason
    assert hold(IDLE, {"email-worker-0": 0}, current=10) is IDLE  # floor 0: no hold
    assert held(IDLE, {"email-worker-0": 1}, current=10).desired == 1


def test_a_scale_down_keeps_every_ordinal_up_to_the_highest_busy_one() -> None:
    decision = held(IDLE, {"email-worker-2": 1})
    assert (decision.desired, decision.reason_code) == (3, ReasonCode.HOLD_ACTIVE)
    assert decision.reason == (
        "3 -> 3: all types idle for 300 s; keeping 3: pod email-worker-2 (ordinal 2) runs "
        "a task and a StatefulSet removes the highest ordinals first"
    )
    lower = held(IDLE, {"email-worker-0": 1})
    assert lower.desired == 1
    assert lower.reason.startswith(
        "3 -> 1: all types idle for 300 s; keeping 1: pod email-worker-0"
    )


@pytest.mark.parametrize(
    ("given", "busy", "current"),
    [
        (IDLE, {}, 3),  # nothing runs
        (IDLE, {"email-worker-2": 0, "other-2": 1}, 3),  # nothing of ours runs
        (Step(3, ReasonCode.DEMAND, "..."), {"email-worker-2": 1}, 3),  # no scale-down
        (Step(5, ReasonCode.DEMAND, "..."), {"email-worker-2": 1}, 3),  # scale-up
        (Step(2, ReasonCode.DEMAND, "..."), {"email-worker-1": 1}, 3),  # 2 keeps it
    ],
)
def test_what_removes_no_busy_pod_is_left_alone(
    given: Step, busy: dict[str, int], current: int
) -> None:
    assert hold(given, busy, current=current) is given


def test_the_hold_is_never_above_the_current_replicas_or_max_replicas() -> None:
    # a busy pod above the current count (still terminating) holds no more than current
    assert held(IDLE, {"email-worker-7": 1}, current=3).desired == 3
    lowered = Step(4, ReasonCode.MAX_REPLICAS, "..., capped at maxReplicas")
    assert hold(lowered, {"email-worker-5": 1}, current=6, most=4) is lowered


def test_only_a_stateful_set_target_is_held() -> None:
    workers = (WorkerObservation("w1", "email-worker-2", ("a",), threads=1, busy=1),)
    deployment = facts(observation(workers, a={"active": 1}), current=3)  # statefulset None
    assert ordinal_hold.apply(deployment, IDLE) is IDLE


# --- in the reconcile pass ---------------------------------------------------------------


def scaler(kind: str) -> ScalerState:
    ref = {"apiVersion": "apps/v1", "kind": kind, "name": "email-worker"}
    body: dict[str, Any] = {
        "scaleTargetRef": ref,
        "redis": {"url": "redis://127.0.0.1:6379/0"},
        "taskTypes": [{"name": "email", "idleThresholdSeconds": 0}],
        "tasksPerReplica": 1,
        "scaleDownStabilizationSeconds": 0,
    }
    config = config_from_object({"metadata": {"name": "s"}, "spec": body})
    history = History.for_policy(config.policy)
    return ScalerState(config, MemoryActuator(), ("redis://unused", "taskscale"), history)


def one_task_on(pod: str) -> Observation:
    worker = WorkerObservation("w1", pod, ("email",), threads=1, busy=1)
    types = {"email": TypeObservation("email", active=1)}
    return Observation(at=1000.0, types=types, workers=(worker,), schedulers_alive=1)


def test_the_pass_holds_a_stateful_set_at_its_busy_ordinal_and_a_deployment_at_its_busy_pods() -> (
    None
):
    sts = _decide(
        scaler("StatefulSet"), one_task_on("email-worker-2"), now=0, current=3, error=None
    )
    assert (sts.desired, sts.reason_code) == (3, ReasonCode.HOLD_ACTIVE)
    assert "pod email-worker-2 (ordinal 2) runs a task" in sts.reason
    # a Deployment removes the idle pods first (pod-deletion-cost): one busy pod keeps one
    dep = _decide(scaler("Deployment"), one_task_on("email-worker-2"), now=0, current=3, error=None)
    assert dep.desired == 1
