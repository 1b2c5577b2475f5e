"""The idle rule: with nothing to do, go to min only once every type is idle.

With nothing queued, due, upcoming or active, the target goes to
``minReplicas`` (possibly 0; reason code ``Idle``) only when every type has
been idle past its threshold (a type that never completed a task is idle).
Until then it keeps *one* replica (or min) warm -- the last one is what the
idle threshold protects -- and the rest follow demand down through the
scale-down window (``WaitingIdle``).  Holding *every* current replica
instead would keep a fleet sized for the last burst for the whole
threshold: in bench/simulate.py that cost about as many replica-seconds as
KEDA's 300 s cooldown.  The raw recommendation the windows remember is not
changed: the scale-down window holds the drop to min like any other.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode, ScalingPolicy


def apply(facts: Facts, step: Step) -> Step:
    """Min once every type is idle; one warm replica while some is not yet."""
    sizing, policy = step.sizing, facts.policy
    if sizing is None or sizing.work or sizing.upcoming:
        return step
    if sizing.all_idle:
        return step.to(policy.min_replicas, ReasonCode.IDLE, _idle_sentence(policy))
    warm = min(facts.current, 1)
    held = min(max(warm, step.replicas), policy.max_replicas)
    if step.replicas > warm:  # the rate floor still asks for more
        return step.to(held, step.code, step.why)
    why = f"nothing to do; keeping {held} until every type is idle ({sizing.idle_note})"
    return step.to(held, ReasonCode.WAITING_IDLE, why)


def _idle_sentence(policy: ScalingPolicy) -> str:
    thresholds = sorted({t.idle_threshold_s for t in policy.types})
    if len(thresholds) == 1:
        return f"all types idle for {thresholds[0]:g} s"
    return f"all types idle past their thresholds ({thresholds[0]:g}-{thresholds[-1]:g} s)"
