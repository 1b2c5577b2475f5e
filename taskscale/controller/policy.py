"""The scaling policy: observations + settings + recent history -> replicas.

:func:`decide` is the policy as a pure function: no I/O, so the unit tests
and ``bench/simulate.py`` drive the very rules the reconciler runs.  The
rules themselves, one module each and in the order they apply, are listed in
``taskscale/controller/rules/__init__.py``; ``decide`` applies that list
with no scaler settings beyond the policy (no pause, no fallback, not a
StatefulSet: those rules change nothing here).  The reconcile pass applies
the same list with its settings.  A caller that keeps calling ``decide``
records each decision::

    decision = decide(observation_or_None, policy, history, now=now, current=n)
    history.record(now, observation_or_None, decision)
"""

from __future__ import annotations

from taskscale.controller import rules
from taskscale.controller.history import RECOMMENDATION as RECOMMENDATION
from taskscale.controller.history import History as History
from taskscale.controller.rules.base import Facts
from taskscale.controller.types import Decision, Observation, ScalingPolicy


def decide(
    observation: Observation | None,
    policy: ScalingPolicy,
    history: History,
    *,
    now: float,
    current: int,
) -> Decision:
    """How many replicas the target should have now, and why.

    ``now`` is the caller's clock (stabilization windows use it); idle ages
    and rates use ``observation.at``, the Redis clock ``IDLE_SINCE`` and the
    counters were written with.  ``current`` is the target's replicas now.
    """
    return rules.apply(Facts(observation, policy, history, now, current))
