"""The steady rule (rules/steady.py): a sizing that changes nothing is Steady."""

from __future__ import annotations

import pytest
from rulefacts import facts, observation, step

from taskscale.controller.rules import steady
from taskscale.controller.types import ReasonCode


@pytest.mark.parametrize("code", sorted(steady.SIZING_CODES))
def test_a_sizing_reason_that_moves_nothing_is_steady(code: str) -> None:
    calm = steady.apply(facts(observation(), current=3), step(3, code))
    assert (calm.replicas, calm.code, calm.why) == (3, ReasonCode.STEADY, "the sizing")


@pytest.mark.parametrize(
    ("replicas", "code"),
    [
        (4, ReasonCode.DEMAND),  # it moves
        (3, ReasonCode.STABILIZING),  # a window is why it does not move
        (3, ReasonCode.QUEUE_WAIT),
        (3, ReasonCode.HOLD_ACTIVE),
    ],
)
def test_a_move_or_a_hold_keeps_its_code(replicas: int, code: str) -> None:
    given = step(replicas, code)
    assert steady.apply(facts(observation(), current=3), given) is given
