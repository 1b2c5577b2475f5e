"""The step-limit rule (rules/step_limit.py)."""

from __future__ import annotations

from rulefacts import facts, observation, policy, step

from taskscale.controller.rules import step_limit
from taskscale.controller.types import ReasonCode


def test_a_change_is_bounded_by_the_step_limits_both_ways() -> None:
    pol = policy(max_scale_up_step=2, max_scale_down_step=1)
    up = step_limit.apply(facts(observation(), pol, current=1), step(9))
    assert (up.replicas, up.code, up.why) == (
        3,
        ReasonCode.STEP_LIMIT,
        "the sizing; step limited to +2",
    )
    down = step_limit.apply(facts(observation(), pol, current=5), step(0))
    assert (down.replicas, down.why) == (4, "the sizing; step limited to -1")
    within = step(2)
    assert step_limit.apply(facts(observation(), pol, current=1), within) is within


def test_zero_means_unbounded() -> None:
    given = step(9)
    assert step_limit.apply(facts(observation(), policy(), current=1), given) is given
