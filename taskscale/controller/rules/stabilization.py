"""The stabilization rule: HPA-style windows over the recent recommendations,
and no scale-up for a queue the ready workers clear before a new pod is up.

A scale-up goes no higher than the lowest recommendation of the last
``scaleUpStabilizationSeconds``, a scale-down no lower than the highest of
the last ``scaleDownStabilizationSeconds`` (reason code ``Stabilizing``).
The recommendations are the raw ones the sizing and queue-wait rules set,
which the reconcile pass records in the history after every decision --
a pause's and a fallback's too, so the window holds after those end.

The drain hold (also ``Stabilizing``): bursty arrivals push the queue above
the rate floor's mean for a moment, and counting every queued task as a
thread asks for a pod that starts after the queue is gone, idles through the
scale-down window and is removed -- a down-then-up flap, a pod start for
nothing.  So a scale-up is held at the current replicas while (1) the
arrivals the rate floor measured fit the current replicas, and (2) the
current replicas' threads clear the backlog beyond the free threads
(queued, due and upcoming tasks, at the longest mean service time seen)
within a quarter of the warm-up lead (:data:`DRAIN_SHARE`) -- the lead is
pod start-up plus a margin, so a pod asked for now would be ready only after
that, and after the pods already starting.  The threads are the ready
workers'; a pod still starting counts as the ready ones do on average (at
``tasksPerReplica`` while none is ready: an overstated one must not hold
scale-ups for long).  A scale from zero, a scale-up the queue-wait rule
asked for, and a pass with no service time measured yet are never held.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step, ceil_div
from taskscale.controller.types import ReasonCode, busy_by_pod

#: The share of the warm-up lead the ready workers may take to clear a backlog
#: before a scale-up is asked for (bench/simulate.py: 0.25 kept every p99 wait;
#: 0.5 let the untuned row's, with its 30 s lead, grow from 7.4 to 8.5 s).
DRAIN_SHARE = 0.25
_SERVICE = "service_s:"


def apply(facts: Facts, step: Step) -> Step:
    """Up to the lowest, down to the highest recent recommendation; no
    scale-up for a backlog the ready workers clear first."""
    rec, target, current, policy = step.recommendation, step.replicas, facts.current, facts.policy
    if rec is None:
        return step
    if target > current and policy.scale_up_stabilization_s > 0:
        window = policy.scale_up_stabilization_s
        lowest = min(facts.history.recommendations_since(facts.now - window), default=rec)
        limit = max(current, min(lowest, rec))
        if limit < target:
            why = f"{step.why}; held to {limit} by the {window:g} s scale-up window"
            step = step.to(limit, ReasonCode.STABILIZING, why)
            target = limit
    if target > current:
        return _drain_hold(facts, step)
    if target < current and policy.scale_down_stabilization_s > 0:
        window = policy.scale_down_stabilization_s
        highest = max(facts.history.recommendations_since(facts.now - window), default=rec)
        limit = min(current, max(highest, rec))
        if limit > target:
            why = f"{step.why}; held at {limit} by the {window:g} s scale-down window"
            return step.to(limit, ReasonCode.STABILIZING, why)
    return step


def _drain_hold(facts: Facts, step: Step) -> Step:
    """Hold a scale-up the current replicas make pointless (module docstring)."""
    sizing, current, obs = step.sizing, facts.current, facts.observation
    if sizing is None or obs is None or current == 0 or step.code == ReasonCode.QUEUE_WAIT:
        return step
    if ceil_div(sizing.busy_rate, facts.policy.tasks_per_replica) > current:
        return step  # the arrivals alone need more replicas
    service_s = max((v for k, v in sizing.details.items() if k.startswith(_SERVICE)), default=0.0)
    busy = busy_by_pod(obs.workers)
    ready = sum(w.threads for w in obs.workers)
    # a pod still starting counts as the ready ones do (tasksPerReplica while
    # none is ready: an overstated one must not hold a scale-up); a pod
    # asked for now would be ready after them
    per_pod = ready / len(busy) if busy else facts.policy.tasks_per_replica
    threads = ready + max(0, current - len(busy)) * per_pod
    if service_s <= 0 or threads <= 0:
        return step
    free = ready - sum(busy.values())
    backlog = max(0, sizing.queued + sizing.due + sizing.upcoming - free)
    drain_s = backlog * service_s / threads
    lead_s = DRAIN_SHARE * facts.policy.warmup_lead_s
    if drain_s > lead_s:
        return step
    why = (
        f"{step.why}; held at {current}: their {threads:g} threads clear the backlog "
        f"in {drain_s:.1f} s, before a new pod could start ({lead_s:g} s)"
    )
    return step.to(current, ReasonCode.STABILIZING, why)
