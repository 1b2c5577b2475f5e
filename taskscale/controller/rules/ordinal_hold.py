"""StatefulSets scale down from the top: never below the highest busy ordinal.

Why it exists: a Deployment's ReplicaSet removes the pods with the lowest
``controller.kubernetes.io/pod-deletion-cost`` first, so the controller can
steer a scale-down onto idle pods.  A StatefulSet ignores that annotation:
scaling it from N to M always removes the pods of ordinals M..N-1 (the
highest first), busy or not.  The only safe scale-down of a StatefulSet is one
that keeps every pod running a task, i.e. never below

    (highest ordinal of a pod running a task) + 1

The pods running tasks come from the worker registry (``base.busy_pods``,
from the same counts the Deployment actuator writes as deletion costs); a
StatefulSet's pods are named ``<statefulset>-<ordinal>``.  This rule only ever *holds* a
scale-down: never above the current replicas or ``maxReplicas``, and it
leaves a scale-up alone.  With ``spec.ordinals.start`` set above 0 the pods
are numbered from there and the hold keeps more than it must (never fewer).

Pure: the last rule of the list (rules/__init__.py), so it holds whatever
the rules before it decided; it acts when the reconcile pass says the target
is an ``apps`` StatefulSet (``Facts.statefulset``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from taskscale.controller.rules.base import Facts, Step, busy_pods
from taskscale.controller.types import ReasonCode


def apply(facts: Facts, step: Step) -> Step:
    """Hold a StatefulSet's scale-down at its highest busy ordinal + 1."""
    statefulset, observation, current = facts.statefulset, facts.observation, facts.current
    if statefulset is None or observation is None or step.replicas >= current:
        return step
    ordinals = _ordinals(statefulset, busy_pods(observation))
    if not ordinals:
        return step
    highest = max(ordinals)
    floor = min(highest + 1, current, facts.policy.max_replicas)
    if step.replicas >= floor:
        return step
    because = (
        f"keeping {floor}: pod {ordinals[highest]} (ordinal {highest}) runs a task and a "
        "StatefulSet removes the highest ordinals first"
    )
    return step.to(floor, ReasonCode.HOLD_ACTIVE, f"{step.why}; {because}")


def _ordinals(statefulset: str, pods: Iterable[str]) -> dict[int, str]:
    """Ordinal -> name of those of ``pods`` that are ``statefulset``'s."""
    pattern = re.compile(re.escape(statefulset) + r"-(0|[1-9][0-9]{0,8})")
    out: dict[int, str] = {}
    for pod in pods:
        match = pattern.fullmatch(pod)
        if match is not None:
            out[int(match.group(1))] = pod
    return out
