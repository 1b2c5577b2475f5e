"""The queue-wait target: add replicas while the oldest task waits too long.

Counting tasks sizes a fleet well when ``tasksPerReplica`` is what a replica
really runs at once and every task takes about as long.  When it is not --
CPU-bound tasks on threads, ten tasks of a second and ten thousand of a
millisecond -- the *age of the oldest waiting task* says what the count can't.
A type with ``maxQueueWaitSeconds`` adds this rule to the policy's sizing:

* the wait of a type is the longer of its oldest ready task's (the head of
  each priority list, from ``due_ms`` or ``enqueued_ms``) and its earliest
  due delayed task's -- the latter only while a scheduler is alive to promote
  it (observe.lua reads both on the Redis clock);
* with the worst ratio r = wait / target above 1, the recommendation is at
  least ceil(working x r) and at least working + 1, where *working* is the
  replicas that are running tasks now (busy pods, or active tasks /
  tasks-per-replica).  Scaling on the replicas that work, not on the
  current count, keeps pods that are still starting from compounding the
  step on every pass; the step limits and the scale-up window bound it further;
* it only ever raises the recommendation (clamped to maxReplicas), never
  below the current replicas while the wait is over target (no scale-down
  with old tasks waiting), and at least 1, so nothing waiting is left at zero.

Pure: a rule of the list (rules/__init__.py), right after the sizing; the
recommendation it raises is the one the windows remember.
"""

from __future__ import annotations

import math

from taskscale.controller.rules.base import Facts, Step, ceil_div
from taskscale.controller.rules.no_scheduler import scheduler_alive
from taskscale.controller.types import ReasonCode, TypeObservation


def oldest_wait(obs: TypeObservation, *, scheduler_alive: bool) -> float | None:
    """Seconds the type's oldest ready (or, with a scheduler, due) task has waited."""
    waits = [w for w in (obs.oldest_ready_s, obs.oldest_due_s if scheduler_alive else None) if w]
    return max(waits) if waits else None


def apply(facts: Facts, step: Step) -> Step:
    """Raise the recommendation when some type's oldest task waits past its target."""
    observation, sizing, policy = facts.observation, step.sizing, facts.policy
    if observation is None or sizing is None:
        return step
    types, alive = observation.types, scheduler_alive(observation)
    worst: tuple[float, str, float, float] | None = None  # (ratio, type, wait, target)
    for tp in policy.types:
        if tp.max_queue_wait_s is None or tp.name not in types:
            continue
        obs = types[tp.name]
        if obs.paused:
            continue  # `taskscale types pause`: no replica would claim it
        if obs.concurrency_limit and obs.active >= obs.concurrency_limit:
            continue  # at its fleet-wide cap: more replicas would not run it sooner
        wait = oldest_wait(obs, scheduler_alive=alive)
        if wait is None or wait <= tp.max_queue_wait_s:
            continue
        ratio = wait / tp.max_queue_wait_s
        if worst is None or ratio > worst[0]:
            worst = (ratio, tp.name, wait, tp.max_queue_wait_s)
    if worst is None:
        return step
    ratio, name, wait, target = worst
    working = max(sizing.busy_pods, ceil_div(sizing.active, policy.tasks_per_replica))
    wanted = max(math.ceil(working * ratio - 1e-9), working + 1, 1)
    current = facts.current
    capped = min(max(wanted, current), policy.max_replicas)
    if capped <= step.replicas:
        return step
    over = f"the oldest {name!r} task has waited {wait:.0f} s, over its {target:g} s target"
    code = ReasonCode.QUEUE_WAIT
    if wanted <= current:
        why = f"{over}: holding {capped} ({working} working)"
    else:
        why = f"{over}: {capped} replicas ({working} working x {ratio:.1f})"
        if capped < wanted:
            code, why = ReasonCode.MAX_REPLICAS, f"{why}, capped at maxReplicas"
    return Step(capped, code, f"{step.why}; {why}", capped, sizing)
