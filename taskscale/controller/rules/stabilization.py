"""The stabilization rule: HPA-style windows over the recent recommendations.

A scale-up goes no higher than the lowest recommendation of the last
``scaleUpStabilizationSeconds``, a scale-down no lower than the highest of
the last ``scaleDownStabilizationSeconds`` (reason code ``Stabilizing``).
The recommendations are the raw ones the sizing and queue-wait rules set,
which the reconcile pass records in the history after every decision --
a pause's and a fallback's too, so the window holds after those end.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """Up to the lowest, down to the highest recent recommendation."""
    rec, target, current, policy = step.recommendation, step.replicas, facts.current, facts.policy
    if rec is None:
        return step
    if target > current and policy.scale_up_stabilization_s > 0:
        window = policy.scale_up_stabilization_s
        lowest = min(facts.history.recommendations_since(facts.now - window), default=rec)
        limit = max(current, min(lowest, rec))
        if limit < target:
            why = f"{step.why}; held to {limit} by the {window:g} s scale-up window"
            return step.to(limit, ReasonCode.STABILIZING, why)
    if target < current and policy.scale_down_stabilization_s > 0:
        window = policy.scale_down_stabilization_s
        highest = max(facts.history.recommendations_since(facts.now - window), default=rec)
        limit = min(current, max(highest, rec))
        if limit > target:
            why = f"{step.why}; held at {limit} by the {window:g} s scale-down window"
            return step.to(limit, ReasonCode.STABILIZING, why)
    return step
