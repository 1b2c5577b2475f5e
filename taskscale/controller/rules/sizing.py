"""The sizing rule: the tasks the observation shows -> a raw recommendation.

Per served type, summed: demand = queued + due + active; look-ahead adds
``upcoming`` (delayed tasks due within the warm-up lead); a *rate floor* of
arrival rate x mean service time (Little's law) keeps the workers of a queue
that drains as fast as it fills.  Replicas = ceil(tasks /
tasks-per-replica), clamped to [min, max] (reason codes ``Demand``,
``Lookahead``, ``RateFloor``, ``HoldActive``, ``MinReplicas``,
``MaxReplicas``).  What is not work a worker may claim is left out here, in
the one loop over the types: a capped type's tasks beyond its cap
(caps.within_cap) and, with no scheduler alive, due delayed tasks
(no_scheduler.py); the rules of those names say so in the sentence.

This rule starts the recommendation the later rules adjust and the windows
remember, and leaves its :class:`Sizing` on the step for them (idle,
queue-wait, busy hold ...).

Arrival rates are measured as *ready arrivals*: claimed + growth of the
ready/due backlog between two observations.  The ``enqueued`` counter would
count a delayed task when it is scheduled (possibly hours early) instead of
when it becomes work; look-ahead covers it at the right moment instead.
"""

from __future__ import annotations

import dataclasses
import math

from taskscale.controller.history import History
from taskscale.controller.rules.base import Facts, Sizing, Step, busy_pod_count, ceil_div
from taskscale.controller.rules.caps import within_cap
from taskscale.controller.rules.no_scheduler import scheduler_alive
from taskscale.controller.types import (
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
)

_NEVER_SEEN = TypeObservation(task_type="")


def apply(facts: Facts, step: Step) -> Step:
    """The raw recommendation (clamped to [min, max]) and what drove it."""
    if facts.observation is None:
        return step
    sizing = size(facts.observation, facts.policy, facts.history)
    rec, code, why = _recommend(sizing, facts.policy)
    return Step(rec, code, why, rec, sizing)


def size(observation: Observation, policy: ScalingPolicy, history: History) -> Sizing:
    """Sum the served types' numbers and derive their rates in one pass."""
    base = history.oldest_sample_since(observation.at - policy.rate_window_s)
    dt = observation.at - base.at if base is not None else 0.0
    queued = due = active = upcoming = 0
    busy_rate = 0.0
    all_idle = True
    idle_note = ""
    longest_wait = -1.0
    details: dict[str, float] = {}
    no_scheduler_alive = not scheduler_alive(observation)
    stranded = capped = 0
    cap_notes: list[str] = []
    tpr = policy.tasks_per_replica
    types = observation.types
    at = observation.at
    old_types = base.types if base is not None and dt > 0 else None  # None: no rates
    # One loop over the types, on plain ints: a dataclasses.replace per type
    # (a due count zeroed, a cap applied) cost more than everything else here.
    for tp in policy.types:
        name = tp.name
        obs = types.get(name, _NEVER_SEEN)
        q, d, a, u = obs.queued, obs.due, obs.active, obs.upcoming
        paused = obs.paused
        if paused:  # `taskscale types pause`: its waiting tasks are not demand
            q = d = u = 0
        if no_scheduler_alive and d:  # nothing can promote them: not claimable work
            stranded += d
            d = 0
        ready = q + d  # before the cap: the rate counts every arrival
        if obs.concurrency_limit:
            kept, over = within_cap(
                obs if d == obs.due else dataclasses.replace(obs, due=d), tpr, cap_notes
            )
            capped += over
            q, d, u = kept.queued, kept.due, kept.upcoming
        queued += q
        due += d
        active += a
        upcoming += u
        if q or d or a:
            wait = math.inf
        elif obs.idle_since is None:  # never finished a task: never seen
            continue
        else:
            wait = max(0.0, tp.idle_threshold_s - (at - obs.idle_since))
            if wait <= 0:
                continue
        all_idle = False
        if wait > longest_wait:
            longest_wait = wait
            idle_note = _idle_note(name, q or d or a, obs, tp.idle_threshold_s, at)
        if old_types is None or paused:
            continue
        # the arrivals, inline (this runs per type per pass); _type_rate only
        # for a type that had some
        old = old_types.get(name, _NEVER_SEEN)
        claimed = obs.claimed_total - old.claimed_total
        if claimed < 0:  # counter reset (see _increase)
            claimed = obs.claimed_total
        arrivals = claimed + ready - (old.queued + old.due)
        if arrivals > 0:
            busy_rate += _type_rate(name, obs, arrivals, old, dt, details)
    # positional, in the fields' order (half the keywords' cost: once a scaler a pass)
    return Sizing(
        queued,
        due,
        active,
        upcoming,
        busy_rate,
        busy_pod_count(observation),
        all_idle,
        idle_note,
        details,
        stranded,
        capped,
        ", ".join(cap_notes) if cap_notes else "",
    )


def _idle_note(
    name: str, has_work: int, obs: TypeObservation, threshold_s: float, at: float
) -> str:
    if has_work:
        return f"{name!r} has work"
    idle_for = at - (obs.idle_since or at)
    return f"{name!r} idle {idle_for:.0f} s of {threshold_s:g} s"


def _increase(old: int, new: int) -> int:
    """Counter increase between two reads; a smaller value means the counter
    restarted from zero, so the increase is the new value (never negative)."""
    return new - old if new >= old else new


def _type_rate(
    name: str,
    obs: TypeObservation,
    arrivals: int,
    old: TypeObservation,
    dt: float,
    details: dict[str, float],
) -> float:
    """Tasks of one type kept busy by its arrivals: arrival rate x service time
    (``arrivals``: claimed + growth of its ready backlog since ``old``, over
    ``dt`` s, more than 0; due tasks only if they can be promoted)."""
    finished = _increase(
        old.completed_total + old.failed_total, obs.completed_total + obs.failed_total
    )
    if finished == 0:
        return 0.0
    service_s = _increase(old.service_ms_total, obs.service_ms_total) / (1000.0 * finished)
    rate = min(arrivals / dt, obs.rate_limit_per_s or math.inf)  # claims obey the limit
    details["arrival_per_s:" + name] = rate
    details["service_s:" + name] = service_s
    return min(rate * service_s, obs.concurrency_limit or math.inf)


def _recommend(sizing: Sizing, policy: ScalingPolicy) -> tuple[int, str, str]:
    """The raw recommendation (clamped to [min, max]) and what drove it."""
    tpr = policy.tasks_per_replica
    by_work = ceil_div(sizing.work + sizing.upcoming, tpr)
    by_rate = ceil_div(sizing.busy_rate, tpr)
    counts = f"{sizing.queued} tasks queued, {sizing.due} due, {sizing.active} active"
    per = f"({tpr} per replica)"
    if by_rate > by_work:
        raw, code = by_rate, ReasonCode.RATE_FLOOR
        why = f"arrivals keep {sizing.busy_rate:.1f} tasks busy: {raw} replicas {per}"
    elif sizing.upcoming and by_work > ceil_div(sizing.work, tpr):
        raw, code = by_work, ReasonCode.LOOKAHEAD
        lead = "the warm-up lead"
        if policy.provisioning_lead_s:
            lead = (
                f"{policy.lookahead_s:g} s ({policy.warmup_lead_s:g} s warm-up + "
                f"{policy.provisioning_lead_s:g} s node provisioning)"
            )
        why = f"{counts} and {sizing.upcoming} delayed due within {lead} need {raw} replicas {per}"
    elif sizing.active and not (sizing.queued or sizing.due or sizing.upcoming or sizing.capped):
        raw, code = by_work, ReasonCode.HOLD_ACTIVE
        why = f"nothing queued, {sizing.active} tasks active need {raw} replicas {per}"
    else:
        raw, code = by_work, ReasonCode.DEMAND
        why = f"{counts} need {raw} replicas {per}"
    if raw > policy.max_replicas:
        return policy.max_replicas, ReasonCode.MAX_REPLICAS, f"{why}, capped at maxReplicas"
    if raw < policy.min_replicas:
        return policy.min_replicas, ReasonCode.MIN_REPLICAS, f"{why}, raised to minReplicas"
    return raw, code, why
