"""The fail-static rule (rules/fail_static.py): no observation, no change."""

from __future__ import annotations

from rulefacts import facts, observation, step

from taskscale.controller.rules import apply as apply_rules
from taskscale.controller.rules import fail_static
from taskscale.controller.rules.base import Fallback
from taskscale.controller.types import ReasonCode


def test_without_an_observation_the_current_replicas_are_held_and_the_list_ends() -> None:
    held = fail_static.apply(facts(None, current=4), step(0))
    assert (held.replicas, held.code, held.final) == (4, ReasonCode.FAIL_STATIC, True)
    assert held.why == "Redis could not be read; holding replicas"
    assert held.recommendation is None  # a hold is no recommendation for the windows


def test_with_an_observation_it_leaves_the_step_alone() -> None:
    given = step(0)
    assert fail_static.apply(facts(observation(a={"queued": 1})), given) is given


def test_in_the_list_it_holds_until_the_fallback_is_due() -> None:
    early = facts(None, current=2, fallback=Fallback(replicas=5), redis_failures=1)
    decision = apply_rules(early)
    assert (decision.desired, decision.reason_code) == (2, ReasonCode.FAIL_STATIC)
    assert decision.details == {}  # the history keeps no recommendation for it
    late = apply_rules(early._replace(redis_failures=3))
    assert (late.desired, late.reason_code) == (5, ReasonCode.FALLBACK)
