"""The rollout hold (rules/rollout_hold.py), pure, and how the reconcile pass
reads a Deployment's rollout only to check a scale-down."""

from __future__ import annotations

from typing import Any

import pytest
from rulefacts import facts, observation, policy

from support.controller import MemoryActuator
from taskscale.controller import policy as policy_module
from taskscale.controller.config import config_from_object
from taskscale.controller.history import History
from taskscale.controller.reconcile_pass import _decide
from taskscale.controller.rules import rollout_hold
from taskscale.controller.rules.base import Step
from taskscale.controller.scaler_state import ScalerState
from taskscale.controller.types import Observation, ReasonCode, Rollout, TypeObservation

DOWN = Step(1, ReasonCode.IDLE, "all types idle for 300 s")
#: A rollout of 4 replicas with 2 pods of the new revision, 1 of them surging.
ROLLING = Rollout(generation=7, observed_generation=7, replicas=4, updated=2, total=5)
DONE = Rollout(generation=7, observed_generation=7, replicas=4, updated=4, total=4)


def hold(given: Step, rollout: Rollout | None, *, current: int = 4, most: int = 10) -> Step:
    settings = facts(observation(a={}), policy(max_replicas=most), current=current)
    return rollout_hold.apply(settings._replace(rollout=rollout), given)


def test_a_scale_down_waits_for_the_rollout_at_the_current_replicas() -> None:
    decision = hold(DOWN, ROLLING).decision(4)
    assert (decision.desired, decision.reason_code) == (4, ReasonCode.ROLLOUT_HOLD)
    assert decision.reason == (
        "4 -> 4: all types idle for 300 s; holding 4 until the Deployment's rollout "
        "ends (2 of 4 pods updated)"
    )


@pytest.mark.parametrize(
    ("rollout", "clause"),
    [
        # the Deployment controller has not seen the new template yet
        (Rollout(8, 7, 4, 4, 4), "generation 8 not yet observed (observedGeneration 7)"),
        # every pod updated, but old ones still finishing their tasks (the surge)
        (Rollout(7, 7, 4, 4, 6, unavailable=1), "2 old pods still running, 1 unavailable"),
        (Rollout(7, 7, 4, 4, 5), "1 old pod still running"),
        (Rollout(7, 7, 4, 0, 4, unavailable=0), "0 of 4 pods updated"),
    ],
)
def test_each_sign_of_a_rollout_in_progress_holds(rollout: Rollout, clause: str) -> None:
    step = hold(DOWN, rollout)
    assert (step.replicas, step.code) == (4, ReasonCode.ROLLOUT_HOLD)
    assert step.why.endswith(f"({clause})")


@pytest.mark.parametrize(
    "rollout",
    [
        None,  # not a Deployment, or not read
        DONE,
        # a finished rollout with a pod Pending for a node: must not block scale-down forever
        Rollout(7, 7, 4, 4, 4, unavailable=1),
        Rollout(7, 7, 4, 2, 5, paused=True),  # a paused rollout waits for a person
        Rollout(7, 7, 4, 2, 5, stalled=True),  # past its progress deadline
    ],
)
def test_no_rollout_in_progress_holds_nothing(rollout: Rollout | None) -> None:
    assert hold(DOWN, rollout) is DOWN


def test_a_scale_up_or_no_change_is_never_held() -> None:
    up = Step(6, ReasonCode.DEMAND, "20 tasks need 6")
    same = Step(4, ReasonCode.STEADY, "...")
    assert hold(up, ROLLING) is up
    assert hold(same, ROLLING) is same


def test_the_hold_is_never_above_max_replicas() -> None:
    lowered = Step(3, ReasonCode.MAX_REPLICAS, "..., capped at maxReplicas")
    assert hold(lowered, ROLLING, current=5, most=3) is lowered
    below = hold(Step(1, ReasonCode.IDLE, "idle"), ROLLING, current=5, most=3)
    assert (below.replicas, below.code) == (3, ReasonCode.ROLLOUT_HOLD)


def test_the_simulator_never_holds_it_has_no_rollout() -> None:
    pol = policy(min_replicas=0)
    idle = observation(a={"idle_since": 1.0})
    decision = policy_module.decide(idle, pol, History.for_policy(pol), now=2e9, current=4)
    assert decision.desired < 4 and decision.reason_code != ReasonCode.ROLLOUT_HOLD


# --- in the reconcile pass ---------------------------------------------------------------


def scaler(rolling: Rollout | None) -> ScalerState:
    body: dict[str, Any] = {
        "scaleTargetRef": {"name": "email-worker"},
        "redis": {"url": "redis://127.0.0.1:6379/0"},
        "taskTypes": [{"name": "email", "idleThresholdSeconds": 0}],
        "tasksPerReplica": 1,
        "scaleDownStabilizationSeconds": 0,
    }
    config = config_from_object({"metadata": {"name": "s"}, "spec": body})
    history = History.for_policy(config.policy)
    actuator = MemoryActuator(replicas=4, rolling=rolling)
    return ScalerState(config, actuator, ("redis://unused", "taskscale"), history)


def tasks(active: int, queued: int = 0) -> Observation:
    types = {"email": TypeObservation("email", active=active, queued=queued)}
    return Observation(at=1000.0, types=types, workers=(), schedulers_alive=1)


def reads(state: ScalerState) -> int:
    actuator = state.actuator
    assert isinstance(actuator, MemoryActuator)
    return actuator.rollout_reads


def test_the_pass_holds_a_scale_down_during_a_rollout_and_not_after() -> None:
    rolling = scaler(ROLLING)
    held = _decide(rolling, tasks(active=1), now=0, current=4, error=None)
    assert (held.desired, held.reason_code) == (4, ReasonCode.ROLLOUT_HOLD)
    assert "until the Deployment's rollout ends (2 of 4 pods updated)" in held.reason
    done = scaler(DONE)
    assert _decide(done, tasks(active=1), now=0, current=4, error=None).desired == 1


def test_the_pass_reads_the_rollout_only_for_a_scale_down() -> None:
    state = scaler(ROLLING)
    up = _decide(state, tasks(active=4, queued=2), now=0, current=4, error=None)
    assert up.desired == 6 and reads(state) == 0  # a scale-up: no read
    same = _decide(state, tasks(active=4), now=0, current=4, error=None)
    assert same.desired == 4 and reads(state) == 0  # no change: no read
    _decide(state, tasks(active=1), now=0, current=4, error=None)
    assert reads(state) == 1
