"""The rollout hold: no scale-down of a Deployment in the middle of its rollout.

Why it exists: a rollout replaces the Deployment's pods one surge at a time,
and the Deployment controller splits a replica change made meanwhile across
the old and the new ReplicaSet (proportional scaling).  A scale-down in the
middle of a rollout therefore removes pods the rollout is counting on --
new pods that just started, or old ones still finishing their tasks -- and
the rollout's own pace (``maxSurge`` up, ``maxUnavailable`` 0 down, each old
pod draining its tasks within ``terminationGracePeriodSeconds``) is lost.
So while the rollout is in progress a scale-down waits (reason code
``RolloutHold``); a scale-up is never held (more capacity during a rollout
is what ``maxSurge`` asks for anyway).

In progress (``types.Rollout.waiting_for``, the rule ``kubectl rollout
status`` waits by): the Deployment controller has not yet observed the last
change (``observedGeneration < generation``), fewer pods than
``spec.replicas`` run the newest revision (``updatedReplicas``), or old
pods are still there (``status.replicas > updatedReplicas``: the surge, or
old pods finishing).  A paused rollout or one past its progress deadline
does not hold: a person ends those, not time.  Unavailable pods of a
finished rollout (e.g. Pending for a node after a scale-up) do not hold
either, so a pod that never schedules cannot block scale-down forever.

Pure: the reconcile pass reads the rollout (``Actuator.rollout``) only when
the rules without it scale down, and asks again with ``Facts.rollout`` set;
``policy.decide`` has none, so the simulator never holds.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """Hold a scale-down at the current replicas while the rollout is in progress."""
    rollout = facts.rollout
    if rollout is None:  # the common case (and decide's): nothing to hold for
        return step
    floor = min(facts.current, facts.policy.max_replicas)
    if step.replicas >= floor:
        return step
    waiting = rollout.waiting_for()
    if not waiting:
        return step
    because = f"holding {floor} until the Deployment's rollout ends ({waiting})"
    return step.to(floor, ReasonCode.ROLLOUT_HOLD, f"{step.why}; {because}")
