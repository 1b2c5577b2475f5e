"""The busy hold: a scale-down never goes below what the running tasks occupy.

A scale-down keeps at least ceil(active / tasks-per-replica) replicas, and at
least one per pod still running a task (from the worker registry), so --
with pod-deletion-cost ordering the removals -- it only ever removes idle
workers; never zero while anything is active (reason code ``HoldActive``).
It comes after the step limits and never raises a count above the current
replicas or ``maxReplicas``.  A StatefulSet ignores pod-deletion-cost: the
ordinal hold (ordinal_hold.py) covers it at the end of the list.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step, ceil_div
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """Hold a scale-down at the replicas the running tasks occupy."""
    sizing, current, policy = step.sizing, facts.current, facts.policy
    if sizing is None or step.replicas >= current or not (sizing.active or sizing.busy_pods):
        return step
    floor = max(ceil_div(sizing.active, policy.tasks_per_replica), sizing.busy_pods, 1)
    floor = min(floor, current, policy.max_replicas)
    if step.replicas >= floor:
        return step
    why = f"{sizing.active} tasks active on {sizing.busy_pods} busy pods: keeping {floor}"
    return step.to(floor, ReasonCode.HOLD_ACTIVE, why)
