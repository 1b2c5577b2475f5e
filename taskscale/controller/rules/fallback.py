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

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """N replicas once Redis failed K passes in a row; final."""
    fallback = facts.fallback
    if fallback is None or facts.redis_failures < fallback.after_failures:
        return step  # the common case (and decide's): fail-static still applies
    cause = f" ({facts.redis_error})" if facts.redis_error else ""
    return Step(
        fallback.replicas,
        ReasonCode.FALLBACK,
        (
            f"Redis could not be read for {facts.redis_failures} passes{cause}; "
            f"fallback to {fallback.replicas} replicas"
        ),
        recommendation=fallback.replicas,
        final=True,
    )
