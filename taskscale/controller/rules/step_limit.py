"""The step-limit rule: at most ``maxScaleUpStep`` / ``maxScaleDownStep`` a pass.

A decision adds or removes no more replicas than the scaler's step limits
allow (0 = unbounded; reason code ``StepLimit``), after the windows, so a
large change is spread over several passes.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """Bound the change from the current replicas."""
    up, down = facts.policy.max_scale_up_step, facts.policy.max_scale_down_step
    desired, current = step.replicas, facts.current
    if up and desired - current > up:
        return step.to(current + up, ReasonCode.STEP_LIMIT, f"{step.why}; step limited to +{up}")
    if down and current - desired > down:
        return step.to(
            current - down, ReasonCode.STEP_LIMIT, f"{step.why}; step limited to -{down}"
        )
    return step
