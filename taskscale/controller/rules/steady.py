"""The steady rule: a decision that changes nothing says so (reason code ``Steady``).

When the rules so far leave the replicas where they are and the reason is
only what the sizing found (demand, look-ahead, rate floor, min/max, idle),
the decision's code is ``Steady``, so ``taskscale_decisions_total`` and the
status tell a quiet pass from one that acted.  A hold by a window, a step
limit, the busy hold or the queue-wait rule keeps its own code: it is a
reason the count did not move.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode

#: Causes a decision may report as Steady when it changes nothing.
SIZING_CODES = frozenset(
    {
        ReasonCode.DEMAND,
        ReasonCode.LOOKAHEAD,
        ReasonCode.RATE_FLOOR,
        ReasonCode.MIN_REPLICAS,
        ReasonCode.MAX_REPLICAS,
        ReasonCode.IDLE,
    }
)


def apply(facts: Facts, step: Step) -> Step:
    """Relabel a no-change decision of the sizing as Steady."""
    if step.replicas == facts.current and step.code in SIZING_CODES:
        return step.to(step.replicas, ReasonCode.STEADY, step.why)
    return step
