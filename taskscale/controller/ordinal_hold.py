"""StatefulSets scale down from the top: never below the highest busy ordinal.

Why it exists: a Deployment's ReplicaSet removes the pods with the lowest
``controller.kubernetes.io/pod-deletion-cost`` first, so the controller can
steer a scale-down onto idle pods.  A StatefulSet ignores that annotation:
scaling it from N to M always removes the pods of ordinals M..N-1 (the
highest first), busy or not.  The only safe scale-down of a StatefulSet is one
that keeps every pod running a task, i.e. never below

    (highest ordinal of a pod running a task) + 1

The pods running tasks come from the worker registry (``busy_by_pod``, the
same counts the Deployment actuator writes as deletion costs); a StatefulSet's
pods are named ``<statefulset>-<ordinal>``.  This rule only ever *holds* a
scale-down: never above the current replicas or ``maxReplicas``, and it
leaves a scale-up alone.  With ``spec.ordinals.start`` set above 0 the pods
are numbered from there and the hold keeps more than it must (never fewer).

Pure, like the policy: the reconciler applies :func:`hold_ordinals` to the
policy's decision when the target is an ``apps`` StatefulSet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from taskscale.controller.types import Decision, ReasonCode


def busy_ordinals(statefulset: str, busy_by_pod: Mapping[str, int]) -> dict[int, str]:
    """Ordinal -> pod name of ``statefulset``'s pods with a task in flight."""
    pattern = re.compile(re.escape(statefulset) + r"-(0|[1-9][0-9]{0,8})")
    out: dict[int, str] = {}
    for pod, busy in busy_by_pod.items():
        match = pattern.fullmatch(pod)
        if match is not None and busy > 0:
            out[int(match.group(1))] = pod
    return out


def ordinal_floor(statefulset: str, busy_by_pod: Mapping[str, int]) -> int:
    """The fewest replicas that keep every busy pod: highest busy ordinal + 1."""
    ordinals = busy_ordinals(statefulset, busy_by_pod)
    return max(ordinals) + 1 if ordinals else 0


def hold_ordinals(
    decision: Decision,
    *,
    statefulset: str,
    busy_by_pod: Mapping[str, int],
    current: int,
    max_replicas: int,
) -> Decision:
    """``decision``, or a hold at the highest busy ordinal + 1 when its
    scale-down would remove a pod that runs a task."""
    if decision.desired >= current:
        return decision
    ordinals = busy_ordinals(statefulset, busy_by_pod)
    if not ordinals:
        return decision
    highest = max(ordinals)
    floor = min(highest + 1, current, max_replicas)
    if decision.desired >= floor:
        return decision
    prefix = f"{current} -> {decision.desired}: "
    why = decision.reason.removeprefix(prefix)
    return Decision(
        desired=floor,
        reason_code=ReasonCode.HOLD_ACTIVE,
        reason=(
            f"{current} -> {floor}: {why}; keeping {floor}: pod {ordinals[highest]} "
            f"(ordinal {highest}) runs a task and a StatefulSet removes the highest "
            "ordinals first"
        ),
        details=decision.details,
    )
