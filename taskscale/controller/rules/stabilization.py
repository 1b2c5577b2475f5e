"""The stabilization rule: HPA-style windows over the recent recommendations,
and no scale-up for a queue the ready workers clear before a new pod is up.

A scale-up goes no higher than the lowest recommendation of the last
``scaleUpStabilizationSeconds``, a scale-down no lower than the highest of
the last ``scaleDownStabilizationSeconds`` (reason code ``Stabilizing``).
The recommendations are the raw ones the sizing and queue-wait rules set,
which the reconcile pass records in the history after every decision --
a pause's and a fallback's too, so the window holds after those end.

The drain hold and the drain cap (also ``Stabilizing``): a pod asked for now
helps only with the work still queued when it is up, after its start.
Bursty arrivals push the queue above the rate floor's mean for a moment, and
counting every queued task as a thread asks for pods that start after the
queue is gone, idle through the scale-down window and are removed -- pod
starts that buy no wait (issue 26: 109 a trace where KEDA's HPA made 80).

- The hold: a scale-up is held at the current replicas while (1) the
  arrivals the rate floor measured fit the current replicas, and (2) the
  current replicas' threads clear the backlog beyond the free threads
  (queued, due and upcoming tasks, at the longest mean service time) within
  a quarter of the warm-up lead (:data:`DRAIN_SHARE`).  The threads are the
  ready workers'; a pod still starting counts as the ready ones do on
  average (at ``tasksPerReplica`` while none is ready: an overstated one
  must not hold scale-ups for long).
- The cap: a scale-up the hold lets through asks for no more replicas than
  the threads that keep up with the arrivals *and* clear that backlog within
  a pod's start: half the warm-up lead (:data:`START_SHARE`; the lead is pod
  start-up plus a margin), or the start the history measured (a pod asked
  for -> a ready worker on one more pod, median of the recent ones) when
  that is shorter -- a lead set well above the pods' start-up would
  otherwise size backlogs to clear over too long.  Threads needed:
  arrivals x service time + backlog x service time / start, in pods of the
  ready ones' threads.  The arrivals are the higher
  of the rate floor's (its window, a minute by default, lags a burst that
  has just begun) and the last start's: claimed tasks plus the growth of the
  ready backlog, less the delayed tasks that were foreseen (a scheduled
  batch coming due is not new load: look-ahead already counted it).
  A pre-warm for delayed tasks due within the lead is capped alike, from
  zero too: the batch is cleared in a start's time, not one thread per task.

The service time is the longest mean of the rate window, or the lifetime
mean of the stats counters when the window saw no task finish (the first
pass of a burst after a lull).  A scale from zero to queued or due tasks
(a cold start: its first tasks are the wait's tail), a scale-up the
queue-wait rule asked for, and a pass with no service time known are never
held or capped.  bench/simulate.py (median of 9 seeds, docs/benchmarks.md):
pod starts 109 -> 73 against KEDA-like's 80, replica-seconds 49 % -> 54 %
fewer, p99 queue wait 0.27x; with every setting at its default (a 30 s lead
on 5-10 s pods, the measured start counting) 100 -> 64 pod starts, 42 % ->
54 % fewer replica-seconds, but a p99 0.27x -> 0.30x (7.8 -> 8.6 s).
"""

from __future__ import annotations

import math

from taskscale.controller.rules.base import Facts, Step, ceil_div
from taskscale.controller.types import Observation, ReasonCode, ScalingPolicy, busy_by_pod

#: The share of the warm-up lead the ready workers may take to clear a backlog
#: before a scale-up is asked for (bench/simulate.py: 0.25 kept every p99 wait;
#: 0.5 let the untuned row's, with its 30 s lead, grow from 7.4 to 8.5 s).
DRAIN_SHARE = 0.25
#: The share of the warm-up lead taken as a pod's start: a scale-up asks for
#: the threads that clear the backlog within it, and the recent arrival rate
#: is read over it (bench/simulate.py: 0.4 of its 15 s lead 82 pod starts,
#: 0.5 73 and 0.67 56 at a p99 wait 0.27x, 0.26x and 0.33x KEDA-like's).
START_SHARE = 0.5
#: Less history than this gives no recent arrival rate (the rate floor's alone).
MIN_RECENT_S = 2.0
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
        return _drain(facts, step)
    if target < current and policy.scale_down_stabilization_s > 0:
        window = policy.scale_down_stabilization_s
        highest = max(facts.history.recommendations_since(facts.now - window), default=rec)
        limit = min(current, max(highest, rec))
        if limit > target:
            why = f"{step.why}; held at {limit} by the {window:g} s scale-down window"
            return step.to(limit, ReasonCode.STABILIZING, why)
    return step


def _drain(facts: Facts, step: Step) -> Step:
    """Hold or cap a scale-up the backlog does not need (module docstring)."""
    sizing, current, obs, policy = step.sizing, facts.current, facts.observation, facts.policy
    if sizing is None or obs is None or step.code == ReasonCode.QUEUE_WAIT:
        return step
    if current == 0 and (sizing.queued or sizing.due):
        return step  # a cold start: its first tasks wait for the first pod
    if ceil_div(sizing.busy_rate, policy.tasks_per_replica) > current:
        return step  # the arrivals alone need more replicas
    service_s = _service_s(sizing.details, obs, policy)
    if service_s <= 0:
        return step
    busy = busy_by_pod(obs.workers)
    ready = 0
    for w in obs.workers:  # a plain loop, no generator: this runs on every scale-up
        ready += w.threads
    # a pod still starting counts as the ready ones do (tasksPerReplica while
    # none is ready: an overstated one must not hold a scale-up); a pod
    # asked for now would be ready after them
    per_pod = ready / len(busy) if busy else policy.tasks_per_replica
    threads = ready + max(0, current - len(busy)) * per_pod
    free = ready - sum(busy.values())
    backlog = max(0, sizing.queued + sizing.due + sizing.upcoming - free)
    hold_s = DRAIN_SHARE * policy.warmup_lead_s
    if threads > 0 and (drain_s := backlog * service_s / threads) <= hold_s:
        why = (
            f"{step.why}; held at {current}: their {threads:g} threads clear the backlog "
            f"in {drain_s:.1f} s, before a new pod could start ({hold_s:g} s)"
        )
        return step.to(current, ReasonCode.STABILIZING, why)
    start_s = _start_s(facts)
    if start_s <= 0 or per_pod <= 0:
        return step
    arriving = max(sizing.busy_rate, _recent_arrivals(facts, obs, start_s) * service_s)
    wanted = math.ceil((arriving + backlog * service_s / start_s) / per_pod - 1e-9)
    limit = max(current, policy.min_replicas, wanted)
    if limit >= step.replicas:
        return step
    why = (
        f"{step.why}; capped at {limit}: {arriving:.1f} threads keep up with the arrivals "
        f"and {backlog} tasks clear within a pod's start ({start_s:g} s)"
    )
    return step.to(limit, ReasonCode.STABILIZING, why)


def _start_s(facts: Facts) -> float:
    """A pod's start: half the warm-up lead, or the measured one if shorter."""
    start_s = START_SHARE * facts.policy.warmup_lead_s
    measured = facts.history.pod_start_s()
    return start_s if measured is None else min(start_s, measured)


def _service_s(details: dict[str, float], obs: Observation, policy: ScalingPolicy) -> float:
    """The longest mean service time of the rate window, else of the served
    types' lifetime counters (0.0: no task ever finished)."""
    if details:  # empty when no type had arrivals over the window
        window = max((v for k, v in details.items() if k.startswith(_SERVICE)), default=0.0)
        if window > 0:
            return window
    lifetime = 0.0
    types = obs.types
    for tp in policy.types:  # every pass of a steady backlog: plain loop, no max() call
        t = types.get(tp.name)
        if t is None:
            continue
        finished = t.completed_total + t.failed_total
        if finished > 0:
            mean = t.service_ms_total / (1000.0 * finished)
            if mean > lifetime:
                lifetime = mean
    return lifetime


def _recent_arrivals(facts: Facts, obs: Observation, span_s: float) -> float:
    """Tasks per second that became work over the last ``span_s`` (at least
    :data:`MIN_RECENT_S` of history, else 0.0): claimed, plus the growth of
    the ready backlog, less the delayed tasks look-ahead had foreseen."""
    base = facts.history.oldest_sample_since(obs.at - span_s)
    if base is None or obs.at - base.at < MIN_RECENT_S:
        return 0.0
    arrived = 0
    for tp in facts.policy.types:
        new, old = obs.types.get(tp.name), base.types.get(tp.name)
        if new is None or old is None or new.paused:
            continue
        claimed = new.claimed_total - old.claimed_total
        if claimed < 0:  # the counter restarted
            claimed = new.claimed_total
        foreseen = max(0, old.upcoming - new.upcoming)
        arrived += max(0, claimed + new.queued + new.due - old.queued - old.due - foreseen)
    return arrived / (obs.at - base.at)
