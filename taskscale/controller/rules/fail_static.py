"""The fail-static rule: no observation, no change.

A pass that could not read Redis knows nothing about the work, and missing
data must never be read as idle -- a target scaled to zero because Redis
blinked would stop every worker with the queues full.  So with no
observation the target keeps its current replicas (reason code
``FailStatic``), and this rule is final.  It comes after the fallback
(fallback.py), which replaces the hold once Redis has failed
``spec.fallback.afterFailures`` passes in a row.  A hold is no
recommendation: the history does not record it for the windows.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """Hold the current replicas when Redis could not be read; final."""
    if facts.observation is not None:
        return step
    why = "Redis could not be read; holding replicas"
    return Step(facts.current, ReasonCode.FAIL_STATIC, why, final=True)
