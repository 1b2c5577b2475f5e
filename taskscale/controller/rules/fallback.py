"""The fallback rule: what to do when Redis has been unreadable for a while.

By default a scaler is *fail-static*: a pass that can't read Redis holds the
target's current replicas (fail_static.py, the next rule), because missing
data must never be read as idle.  Holding is wrong when the target was at
zero or one when Redis went away and work is likely piling up somewhere the
controller can't see, so ``spec.fallback: {replicas: N, afterFailures: K}``
sets the target to N once Redis has failed K passes in a row (reason code
``Fallback``).  The first pass that reads Redis again returns to the policy.
N is recorded in the policy's history as a recommendation (``RECOMMENDATION``
in the decision's details), so after recovery the scale-down stabilization
window holds the target at N until N leaves the window -- as after any other
high recommendation -- and ``maxScaleDownStep`` then bounds each step down.

Pure: the reconcile pass counts the consecutive failed reads and passes the
count in (``Facts.redis_failures``); :class:`Fallback` is in base.py.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Fallback, Step
from taskscale.controller.types import Decision, ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """N replicas once Redis failed K passes in a row; final."""
    fallback = facts.fallback
    if fallback is None:  # the common case (and decide's): nothing to check
        return step
    fell = _fallback(
        fallback, failures=facts.redis_failures, current=facts.current, error=facts.redis_error
    )
    return step if fell is None else fell


def fallback_decision(
    fallback: Fallback | None, *, failures: int, current: int, error: str = ""
) -> Decision | None:
    """The fallback's decision once ``failures`` consecutive passes could not
    read Redis, or None while fail-static still applies (no fallback set, or
    fewer failures than ``after_failures``)."""
    fell = _fallback(fallback, failures=failures, current=current, error=error)
    return None if fell is None else fell.decision(current)


def _fallback(fallback: Fallback | None, *, failures: int, current: int, error: str) -> Step | None:
    if fallback is None or failures < fallback.after_failures:
        return None
    cause = f" ({error})" if error else ""
    return Step(
        fallback.replicas,
        ReasonCode.FALLBACK,
        (
            f"Redis could not be read for {failures} passes{cause}; "
            f"fallback to {fallback.replicas} replicas"
        ),
        recommendation=fallback.replicas,
        final=True,
    )
