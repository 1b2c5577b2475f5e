"""The stabilization rule (rules/stabilization.py): the HPA-style windows."""

from __future__ import annotations

from rulefacts import T0, facts, observation, policy, step

from taskscale.controller.history import History
from taskscale.controller.rules import stabilization
from taskscale.controller.types import Decision, ReasonCode


def history_with(pol_rec: int, at: float) -> History:
    history = History(max_age_s=600.0, sample_every_s=0.0)
    history.record(at, observation(), Decision(pol_rec, ReasonCode.DEMAND, "..."))
    return history


def test_a_scale_down_is_held_at_the_highest_recommendation_of_the_window() -> None:
    pol = policy(scale_down_stabilization_s=60.0)
    recent = facts(observation(), pol, current=5, history=history_with(4, T0 - 10))
    held = stabilization.apply(recent, step(1))
    assert (held.replicas, held.code) == (4, ReasonCode.STABILIZING)
    assert held.why == "the sizing; held at 4 by the 60 s scale-down window"
    old = facts(observation(), pol, current=5, history=history_with(4, T0 - 61))
    given = step(1)
    assert stabilization.apply(old, given) is given


def test_a_scale_up_waits_for_the_lowest_recommendation_of_the_window() -> None:
    pol = policy(scale_up_stabilization_s=30.0)
    recent = facts(observation(), pol, current=1, history=history_with(2, T0 - 5))
    held = stabilization.apply(recent, step(6))
    assert (held.replicas, held.code) == (2, ReasonCode.STABILIZING)
    assert held.why == "the sizing; held to 2 by the 30 s scale-up window"
