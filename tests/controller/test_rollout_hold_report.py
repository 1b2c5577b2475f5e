"""How a scale-down held for a rollout (reason code RolloutHold) is shown:
``status.rolloutHold``, the ``taskscale_rollout_hold`` gauge, and the
``rollout_hold`` field of the pass the console's Scaling page reads."""

from __future__ import annotations

from typing import Any

from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.decision_log import pass_record
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import PassOutcome, Problem
from taskscale.controller.status_doc import build_status
from taskscale.controller.types import Decision, ReasonCode, ScalingPolicy, TypePolicy

CONFIG = ScalerConfig(
    name="emails",
    namespace="jobs",
    target="email-worker",
    redis=RedisRef(url="redis://r"),
    policy=ScalingPolicy(types=(TypePolicy("email"),)),
)
HELD = Decision(4, ReasonCode.ROLLOUT_HOLD, "4 -> 4: ...; holding 4 until the rollout ends")
DOWN = Decision(1, ReasonCode.IDLE, "4 -> 1: all types idle for 300 s")


def outcome(decision: Decision | None, **changes: Any) -> PassOutcome:
    base: dict[str, Any] = {"current": 4, **changes}
    return PassOutcome(CONFIG, 1000.0, None, decision=decision, **base)


def test_the_status_says_whether_the_last_pass_held_for_a_rollout() -> None:
    held = build_status(outcome(HELD), {}, now=1000.0)
    assert (held["rolloutHold"], held["reasonCode"]) == (True, "RolloutHold")
    assert build_status(outcome(DOWN, scaled=True), held, now=1001.0)["rolloutHold"] is False
    # a pass that could not read the target learns nothing: the last value stays
    failed = outcome(None, current=None, problem=Problem.SCALE_FAILED, message="403")
    assert build_status(failed, held, now=1002.0)["rolloutHold"] is True


def test_the_gauge_is_1_while_held_and_0_after() -> None:
    metrics = ControllerMetrics()
    labels = {"namespace": "jobs", "name": "emails"}
    metrics.record_decision("jobs/emails", current=4, desired=4, reason=ReasonCode.ROLLOUT_HOLD)
    assert metrics.sample("taskscale_rollout_hold", labels) == 1.0
    metrics.record_decision("jobs/emails", current=4, desired=1, reason=ReasonCode.IDLE)
    assert metrics.sample("taskscale_rollout_hold", labels) == 0.0
    metrics.forget_scaler("jobs/emails", ("email",))
    assert metrics.sample("taskscale_rollout_hold", labels) is None


def test_the_scaling_page_record_carries_the_hold() -> None:
    assert pass_record(outcome(HELD))["rollout_hold"] is True
    assert pass_record(outcome(DOWN))["rollout_hold"] is False
    assert pass_record(outcome(None, current=None))["rollout_hold"] is False
