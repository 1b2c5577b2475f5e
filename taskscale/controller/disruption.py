"""Busy pods marked against voluntary disruption, and pods on a leaving node.

Issue 23: a node drain or an autoscaler's consolidation evicts pods in the
middle of long tasks.  On every pass (not only before a scale-down) the
Deployment actuator calls :func:`mark_pods` with the worker registry's
per-pod in-flight counts (``types.busy_by_pod``): every busy pod gets
``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``,
``karpenter.sh/do-not-disrupt: "true"`` and the label ``taskscale.io/busy:
"true"`` (which the chart's PodDisruptionBudget, maxUnavailable 0, selects,
so ``kubectl drain`` waits for the pod); every idle pod that carries the label
loses all three.  It is stateless: one pod list per pass, one patch per pod
whose mark must change, so a restarted or failed-over controller corrects a
stale mark on its first pass.  A pod without the label is never unmarked: an
annotation the user put on the pod template is theirs.

The same list says which pods are on a node that is leaving -- cordoned
(``spec.unschedulable``) or tainted for removal (:data:`REMOVAL_TAINTS`, the
cluster autoscaler's and Karpenter's) -- read from one node list per pass.
Those pods get the Redis drain flag (controller/drain_flags.py): they claim
nothing, finish what they run, go idle, are unmarked here, and the eviction
the PDB held back proceeds.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskscale.controller.kube_client import (
    BUSY_LABEL,
    DO_NOT_DISRUPT,
    FIELD_MANAGER,
    REMOVAL_TAINTS,
    REQUEST_TIMEOUT_S,
    SAFE_TO_EVICT,
)

log = logging.getLogger("taskscale.controller.disruption")

#: Set once nodes were found unreadable (the warning is logged once).
_FORBIDDEN: list[bool] = []

#: How the actuator calls the API: ``call(operation, fn)``, retried and counted.
ApiCall = Callable[[str, Callable[[], Any]], Any]

#: A busy pod's annotations and label, as the patch sets them.
BUSY_ANNOTATIONS = {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"}
BUSY_LABELS = {BUSY_LABEL: "true"}


@dataclass(frozen=True)
class PodMarks:
    """What one pass saw of a target's pods and did to their marks."""

    live: tuple[str, ...] = ()  #: pods not being deleted
    terminating: tuple[str, ...] = ()  #: pods being deleted (their flags left alone)
    protected: tuple[str, ...] = ()  #: busy pods, marked now
    leaving: Mapping[str, str] = field(default_factory=dict)  #: live pod -> its leaving node
    unmarked: tuple[str, ...] = ()  #: pods whose busy mark was removed on this pass


def node_leaving(node: Any) -> bool:
    """A node being drained: cordoned, or tainted for removal by an autoscaler."""
    spec = getattr(node, "spec", None)
    if spec is None:
        return False
    if spec.unschedulable:
        return True
    return any(getattr(t, "key", None) in REMOVAL_TAINTS for t in spec.taints or ())


def mark_patch(meta: Any, busy: bool) -> dict[str, Any] | None:
    """The merge patch that makes a pod's marks say ``busy``; None when they do.
    An idle pod is unmarked only if it carries the label (the mark is ours)."""
    labels = meta.labels or {}
    annotations = meta.annotations or {}
    if busy:
        if labels.get(BUSY_LABEL) == "true" and all(
            annotations.get(k) == v for k, v in BUSY_ANNOTATIONS.items()
        ):
            return None
        return {"metadata": {"labels": BUSY_LABELS, "annotations": BUSY_ANNOTATIONS}}
    if BUSY_LABEL not in labels:
        return None
    return {
        "metadata": {
            "labels": {BUSY_LABEL: None},
            "annotations": {k: None for k in BUSY_ANNOTATIONS},
        }
    }


def mark_pods(
    core: client.CoreV1Api,
    namespace: str,
    selector: str,
    busy_by_pod: Mapping[str, int],
    *,
    call: ApiCall,
) -> PodMarks:
    """Mark the busy pods of ``selector``, unmark the idle ones, and name the
    pods on leaving nodes: one pod list, one node list, a patch per change."""
    pods = call(
        "list_pods",
        lambda: core.list_namespaced_pod(
            namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT_S
        ),
    )
    live, terminating, protected, unmarked = [], [], [], []
    on_node: dict[str, str] = {}
    for pod in pods.items:
        meta = pod.metadata
        if meta is None or meta.name is None:
            continue
        if meta.deletion_timestamp is not None:
            terminating.append(meta.name)
            continue
        live.append(meta.name)
        node = getattr(pod.spec, "node_name", None)
        if node:
            on_node[meta.name] = node
        busy = int(busy_by_pod.get(meta.name, 0)) > 0
        if busy:
            protected.append(meta.name)
        patch = mark_patch(meta, busy)
        patched = patch is not None and patch_pod(core, namespace, meta.name, patch, call=call)
        if patched and not busy:
            unmarked.append(meta.name)
    leaving = _leaving_nodes(core, set(on_node.values()), call=call) if on_node else set()
    return PodMarks(
        live=tuple(live),
        terminating=tuple(terminating),
        protected=tuple(protected),
        leaving={pod: node for pod, node in on_node.items() if node in leaving},
        unmarked=tuple(unmarked),
    )


def pods_gone(
    core: client.CoreV1Api, namespace: str, names: Iterable[str], *, call: ApiCall
) -> set[str]:
    """Which of ``names`` no pod of ``namespace`` has any more (a 404)."""
    gone = set()
    for name in names:
        try:
            call("get_pod", functools.partial(_read_pod, core, namespace, name))
        except ApiException as exc:
            if exc.status != 404:
                raise
            gone.add(name)
    return gone


def _read_pod(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    return core.read_namespaced_pod(name, namespace, _request_timeout=REQUEST_TIMEOUT_S)


def _leaving_nodes(core: client.CoreV1Api, names: set[str], *, call: ApiCall) -> set[str]:
    """Which of ``names`` are leaving; none when Nodes may not be read (the
    chart's ``rbac.readNodes: false``: said once, the marks still work)."""
    try:
        nodes = call(
            "list_nodes",
            # from the API server's watch cache (resourceVersion 0): cheap, and
            # a cordon seen one pass late is flagged on the next
            lambda: core.list_node(resource_version="0", _request_timeout=REQUEST_TIMEOUT_S),
        )
    except ApiException as exc:
        if exc.status != 403:
            raise
        if not _FORBIDDEN:
            log.warning("nodes may not be listed (%s): no drain is seen", exc.reason)
            _FORBIDDEN.append(True)
        return set()
    return {
        n.metadata.name
        for n in nodes.items
        if n.metadata is not None and n.metadata.name in names and node_leaving(n)
    }


def patch_pod(
    core: client.CoreV1Api, namespace: str, pod: str, body: dict[str, Any], *, call: ApiCall
) -> bool:
    """Patch one pod; False when it went away meanwhile (it needs no mark
    and no deletion cost)."""
    try:
        call(
            "patch_pod",
            lambda: core.patch_namespaced_pod(
                pod,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT_S,
            ),
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
        return False
    return True
