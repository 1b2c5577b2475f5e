"""The policy's overrides, pure: the pause annotations and the fallback
after K failed Redis reads (taskscale/controller/rules/pause.py, fallback.py), and
how a TaskScaler object's annotations and spec.fallback become the config.
"""

from __future__ import annotations

from typing import Any

import pytest
from rulefacts import facts, step

from support.controller import MemoryActuator
from taskscale.controller.config import InvalidSpec, ScalerConfig, TargetRef, config_from_object
from taskscale.controller.history import History
from taskscale.controller.reconcile_pass import _decide
from taskscale.controller.rules import apply as apply_rules
from taskscale.controller.rules import fallback as fallback_rule
from taskscale.controller.rules import pause as pause_rule
from taskscale.controller.rules.base import (
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    Fallback,
    Pause,
)
from taskscale.controller.rules.pause import InvalidPause, pause_from_annotations
from taskscale.controller.scaler_state import ScalerState
from taskscale.controller.types import Decision, Observation, ReasonCode, TypeObservation


def obj(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scaleTargetRef": {"name": "w"},
        "redis": {"url": "redis://127.0.0.1:6379/0"},
        "taskTypes": [{"name": "email"}],
    }
    body.update(spec)
    return {"metadata": {"name": "s", "annotations": annotations}, "spec": body}


# --- pause --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, None),
        ({}, None),
        ({PAUSED_ANNOTATION: "true"}, Pause()),
        ({PAUSED_ANNOTATION: "True"}, Pause()),
        ({PAUSED_ANNOTATION: "false"}, None),
        ({PAUSED_REPLICAS_ANNOTATION: "0"}, Pause(replicas=0)),
        ({PAUSED_REPLICAS_ANNOTATION: " 4 "}, Pause(replicas=4)),
        # paused-replicas wins over paused, whatever paused says
        ({PAUSED_ANNOTATION: "false", PAUSED_REPLICAS_ANNOTATION: "2"}, Pause(replicas=2)),
    ],
)
def test_pause_is_read_from_the_annotations(
    annotations: dict[str, str] | None, expected: Pause | None
) -> None:
    assert pause_from_annotations(annotations) == expected


@pytest.mark.parametrize(
    "annotations",
    [
        {PAUSED_ANNOTATION: "maybe"},
        {PAUSED_REPLICAS_ANNOTATION: "-1"},
        {PAUSED_REPLICAS_ANNOTATION: "two"},
        {PAUSED_REPLICAS_ANNOTATION: "1.5"},
        {PAUSED_REPLICAS_ANNOTATION: "100001"},
    ],
)
def test_a_bad_pause_annotation_is_an_error_naming_it(annotations: dict[str, str]) -> None:
    with pytest.raises(InvalidPause, match=r"taskscale\.io/paused"):
        pause_from_annotations(annotations)
    with pytest.raises(InvalidSpec, match=r"taskscale\.io/paused"):
        config_from_object(obj(annotations))


def paused(pause: Pause, *, current: int) -> Decision:
    """The pause rule's decision from ``current`` replicas (it decides alone)."""
    decided = pause_rule.apply(facts(pause=pause, current=current), step(current + 1))
    assert decided.final
    return decided.decision(current)


def test_paused_holds_the_current_replicas() -> None:
    decision = paused(Pause(), current=3)
    assert (decision.desired, decision.reason_code) == (3, ReasonCode.PAUSED)
    assert decision.reason.startswith("3 -> 3: paused by taskscale.io/paused")


def test_paused_replicas_sets_n_whatever_the_current() -> None:
    for current in (0, 2, 7):
        decision = paused(Pause(replicas=2), current=current)
        assert (decision.desired, decision.reason_code) == (2, ReasonCode.PAUSED)
        assert decision.reason == f"{current} -> 2: paused by {PAUSED_REPLICAS_ANNOTATION}: " + (
            "holding 2 replicas"
        )


def test_config_carries_the_pause_and_differs_when_it_changes() -> None:
    plain = config_from_object(obj())
    paused = config_from_object(obj({PAUSED_REPLICAS_ANNOTATION: "1"}))
    assert plain.pause is None and paused.pause == Pause(replicas=1)
    assert plain != paused  # the reconciler re-registers on any config change


# --- fallback -----------------------------------------------------------------


def fell_back(
    fallback: Fallback | None, *, failures: int, current: int, error: str = ""
) -> Decision | None:
    """The fallback rule's decision after ``failures`` failed reads in a row,
    or None when it leaves the step (fail-static still applies)."""
    given = step(current)
    settings = facts(
        None, current=current, fallback=fallback, redis_failures=failures, redis_error=error
    )
    decided = fallback_rule.apply(settings, given)
    if decided is given:
        return None
    assert decided.final
    return decided.decision(current)


def test_without_a_fallback_it_stays_fail_static_however_long_redis_is_down() -> None:
    assert fell_back(None, failures=1000, current=2) is None
    decision = apply_rules(facts(None, current=2, redis_failures=1000))
    assert (decision.desired, decision.reason_code) == (2, ReasonCode.FAIL_STATIC)


def test_fallback_applies_from_the_kth_failure_on() -> None:
    fallback = Fallback(replicas=4, after_failures=3)
    assert fell_back(fallback, failures=0, current=1) is None
    assert fell_back(fallback, failures=2, current=1) is None
    for failures in (3, 4, 50):
        decision = fell_back(fallback, failures=failures, current=1, error="refused")
        assert decision is not None
        assert (decision.desired, decision.reason_code) == (4, ReasonCode.FALLBACK)
        assert decision.reason == (
            f"1 -> 4: Redis could not be read for {failures} passes (refused); "
            "fallback to 4 replicas"
        )
        # the whole rule list gives the same decision: the fallback decides alone
        whole = facts(
            None,
            current=1,
            fallback=fallback,
            redis_failures=failures,
            redis_error="refused",
        )
        assert apply_rules(whole) == decision


def test_fallback_may_scale_down_too() -> None:
    decision = fell_back(Fallback(replicas=0, after_failures=1), failures=1, current=5)
    assert decision is not None and decision.desired == 0


def scaler_with(config: ScalerConfig) -> ScalerState:
    history = History.for_policy(config.policy)
    return ScalerState(config, MemoryActuator(), ("redis://unused", "taskscale"), history)


def one_queued(at: float) -> Observation:
    types = {"email": TypeObservation("email", queued=1)}
    return Observation(at=at, types=types, schedulers_alive=1)


WINDOWED = {"tasksPerReplica": 1, "scaleDownStabilizationSeconds": 60, "maxReplicas": 10}


def test_after_a_fallback_the_scale_down_window_holds_its_replicas_before_they_go() -> None:
    scaler = scaler_with(
        config_from_object(obj(fallback={"replicas": 6, "afterFailures": 2}, **WINDOWED))
    )
    assert _decide(scaler, None, now=0.0, current=1, error="down").desired == 1  # fail-static
    fell = _decide(scaler, None, now=1.0, current=1, error="down")
    assert (fell.desired, fell.reason_code) == (6, ReasonCode.FALLBACK)
    # Redis is back with one task queued: the policy alone says 1, the window keeps 6
    held = _decide(scaler, one_queued(1002.0), now=2.0, current=6, error=None)
    assert (held.desired, held.reason_code) == (6, ReasonCode.STABILIZING)
    assert "held at 6 by the 60 s scale-down window" in held.reason
    later = _decide(scaler, one_queued(1062.0), now=62.0, current=6, error=None)
    assert later.desired == 1  # the fallback's 6 has left the window


def test_fail_static_holds_are_not_recommendations_the_window_keeps() -> None:
    scaler = scaler_with(config_from_object(obj(**WINDOWED)))  # no fallback
    for now in (0.0, 1.0, 2.0):
        held = _decide(scaler, None, now=now, current=5, error="down")
        assert (held.desired, held.reason_code) == (5, ReasonCode.FAIL_STATIC)
    assert _decide(scaler, one_queued(1003.0), now=3.0, current=5, error=None).desired == 1


def test_after_a_pause_the_scale_down_window_holds_the_paused_replicas() -> None:
    scaler = scaler_with(config_from_object(obj({PAUSED_REPLICAS_ANNOTATION: "8"}, **WINDOWED)))
    assert _decide(scaler, one_queued(1000.0), now=0.0, current=2, error=None).desired == 8
    scaler.config = config_from_object(obj(**WINDOWED))  # the annotation removed
    held = _decide(scaler, one_queued(1001.0), now=1.0, current=8, error=None)
    assert (held.desired, held.reason_code) == (8, ReasonCode.STABILIZING)
    assert _decide(scaler, one_queued(1061.0), now=61.0, current=8, error=None).desired == 1


def test_fallback_is_read_from_the_spec_with_its_default() -> None:
    assert config_from_object(obj()).fallback is None
    config = config_from_object(obj(fallback={"replicas": 2}))
    assert config.fallback == Fallback(replicas=2, after_failures=3)
    config = config_from_object(obj(fallback={"replicas": 0, "afterFailures": 1}))
    assert config.fallback == Fallback(replicas=0, after_failures=1)


@pytest.mark.parametrize(
    "fallback",
    [{}, {"afterFailures": 2}, {"replicas": -1}, {"replicas": 1, "afterFailures": 0}, "3"],
)
def test_a_bad_fallback_is_an_error(fallback: object) -> None:
    with pytest.raises(InvalidSpec, match="fallback"):
        config_from_object(obj(fallback=fallback))


# --- scaleTargetRef --------------------------------------------------------------


def test_scale_target_ref_defaults_to_an_apps_v1_deployment() -> None:
    config = config_from_object(obj())
    assert (config.target, config.target_ref) == ("w", TargetRef("apps/v1", "Deployment"))
    ref = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r"}
    config = config_from_object(obj(scaleTargetRef=ref))
    assert config.target == "r"
    assert (config.target_ref.group, config.target_ref.version) == ("argoproj.io", "v1alpha1")
    assert config.target_ref.kind == "Rollout"


@pytest.mark.parametrize("ref", [{"apiVersion": "", "name": "w"}, {"kind": "", "name": "w"}])
def test_a_bad_scale_target_ref_is_an_error(ref: dict[str, str]) -> None:
    with pytest.raises(InvalidSpec, match="scaleTargetRef"):
        config_from_object(obj(scaleTargetRef=ref))
