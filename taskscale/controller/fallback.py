"""The fallback: what to do when Redis has been unreadable for a while.

By default a scaler is *fail-static*: a pass that can't read Redis holds the
target's current replicas (``policy.decide`` with no observation), because
missing data must never be read as idle.  Holding is wrong when the target was
at zero or one when Redis went away and work is likely piling up somewhere the
controller can't see, so ``spec.fallback: {replicas: N, afterFailures: K}``
sets the target to N once Redis has failed K passes in a row (reason code
``Fallback``).  The first pass that reads Redis again returns to the policy.
N is recorded in the policy's history as a recommendation (``RECOMMENDATION``
in the decision's details), so after recovery the scale-down stabilization
window holds the target at N until N leaves the window -- as after any other
high recommendation -- and ``maxScaleDownStep`` then bounds each step down.

Pure, like the policy: the reconciler counts the consecutive failed reads and
passes the count in.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskscale.controller.history import RECOMMENDATION
from taskscale.controller.types import Decision, ReasonCode


@dataclass(frozen=True)
class Fallback:
    """``spec.fallback``: ``replicas`` after ``after_failures`` failed reads in a row."""

    replicas: int
    after_failures: int = 3


def fallback_decision(
    fallback: Fallback | None, *, failures: int, current: int, error: str = ""
) -> Decision | None:
    """The fallback's decision once ``failures`` consecutive passes could not
    read Redis, or None while fail-static still applies (no fallback set, or
    fewer failures than ``after_failures``)."""
    if fallback is None or failures < fallback.after_failures:
        return None
    cause = f" ({error})" if error else ""
    return Decision(
        desired=fallback.replicas,
        reason_code=ReasonCode.FALLBACK,
        reason=(
            f"{current} -> {fallback.replicas}: Redis could not be read for {failures} passes"
            f"{cause}; fallback to {fallback.replicas} replicas"
        ),
        details={RECOMMENDATION: fallback.replicas},
    )
