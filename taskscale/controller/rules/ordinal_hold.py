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
from collections.abc import Iterable, Mapping

from taskscale.controller.rules.base import Facts, Step, busy_pods
from taskscale.controller.types import Decision, ReasonCode


def busy_ordinals(statefulset: str, busy_by_pod: Mapping[str, int]) -> dict[int, str]:
    """Ordinal -> pod name of ``statefulset``'s pods with a task in flight."""
    return _ordinals(statefulset, (pod for pod, busy in busy_by_pod.items() if busy > 0))


def ordinal_floor(statefulset: str, busy_by_pod: Mapping[str, int]) -> int:
    """The fewest replicas that keep every busy pod: highest busy ordinal + 1."""
    ordinals = busy_ordinals(statefulset, busy_by_pod)
    return max(ordinals) + 1 if ordinals else 0


def apply(facts: Facts, step: Step) -> Step:
    """Hold a StatefulSet's scale-down at its highest busy ordinal + 1."""
    statefulset, observation = facts.statefulset, facts.observation
    if statefulset is None or observation is None or step.replicas >= facts.current:
        return step
    ordinals = _ordinals(statefulset, busy_pods(observation))
    held = _hold(
        step.replicas, ordinals, current=facts.current, max_replicas=facts.policy.max_replicas
    )
    if held is None:
        return step
    floor, because = held
    return step.to(floor, ReasonCode.HOLD_ACTIVE, f"{step.why}; {because}")


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
    ordinals = busy_ordinals(statefulset, busy_by_pod)
    held = _hold(decision.desired, ordinals, current=current, max_replicas=max_replicas)
    if held is None:
        return decision
    floor, because = held
    why = decision.reason.removeprefix(f"{current} -> {decision.desired}: ")
    return Decision(
        desired=floor,
        reason_code=ReasonCode.HOLD_ACTIVE,
        reason=f"{current} -> {floor}: {why}; {because}",
        details=decision.details,
    )


def _ordinals(statefulset: str, pods: Iterable[str]) -> dict[int, str]:
    """Ordinal -> name of those of ``pods`` that are ``statefulset``'s."""
    pattern = re.compile(re.escape(statefulset) + r"-(0|[1-9][0-9]{0,8})")
    out: dict[int, str] = {}
    for pod in pods:
        match = pattern.fullmatch(pod)
        if match is not None:
            out[int(match.group(1))] = pod
    return out


def _hold(
    desired: int, ordinals: Mapping[int, str], *, current: int, max_replicas: int
) -> tuple[int, str] | None:
    """The floor a scale-down to ``desired`` is held at, and why; None: no hold."""
    if desired >= current or not ordinals:
        return None
    highest = max(ordinals)
    floor = min(highest + 1, current, max_replicas)
    if desired >= floor:
        return None
    return floor, (
        f"keeping {floor}: pod {ordinals[highest]} (ordinal {highest}) runs a task and a "
        "StatefulSet removes the highest ordinals first"
    )
