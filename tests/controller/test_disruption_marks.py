"""The pure parts of controller/disruption.py: which patch makes a pod's busy
marks right (none when they are), and which nodes are leaving."""

from __future__ import annotations

from kubernetes import client

from taskscale.controller.disruption import BUSY_ANNOTATIONS, mark_patch, node_leaving
from taskscale.controller.kube_client import BUSY_LABEL, DO_NOT_DISRUPT, SAFE_TO_EVICT


def _meta(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> object:
    return client.V1ObjectMeta(name="p", labels=labels, annotations=annotations)


def test_a_busy_pod_is_marked_unless_it_is_already() -> None:
    patch = mark_patch(_meta(), busy=True)
    assert patch == {
        "metadata": {
            "labels": {BUSY_LABEL: "true"},
            "annotations": {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"},
        }
    }
    assert mark_patch(_meta({BUSY_LABEL: "true"}, dict(BUSY_ANNOTATIONS)), busy=True) is None
    # half a mark (an annotation removed by hand, another value) is made whole
    assert mark_patch(_meta({BUSY_LABEL: "true"}, {SAFE_TO_EVICT: "false"}), busy=True)
    assert mark_patch(_meta({BUSY_LABEL: "yes"}, dict(BUSY_ANNOTATIONS)), busy=True)


def test_an_idle_pod_loses_our_marks_only() -> None:
    patch = mark_patch(_meta({BUSY_LABEL: "true"}, dict(BUSY_ANNOTATIONS)), busy=False)
    assert patch == {
        "metadata": {
            "labels": {BUSY_LABEL: None},
            "annotations": {SAFE_TO_EVICT: None, DO_NOT_DISRUPT: None},
        }
    }
    assert mark_patch(_meta(), busy=False) is None
    # no label: the annotations are the user's (the pod template's), left alone
    assert mark_patch(_meta(annotations={DO_NOT_DISRUPT: "true"}), busy=False) is None


def _node(unschedulable: bool | None = None, *taints: str) -> client.V1Node:
    spec = client.V1NodeSpec(
        unschedulable=unschedulable,
        taints=[client.V1Taint(key=k, effect="NoSchedule") for k in taints] or None,
    )
    return client.V1Node(metadata=client.V1ObjectMeta(name="n"), spec=spec)


def test_cordoned_or_tainted_for_removal_is_leaving_other_taints_are_not() -> None:
    assert node_leaving(_node(True))
    assert node_leaving(_node(None, "ToBeDeletedByClusterAutoscaler"))
    assert node_leaving(_node(False, "karpenter.sh/disrupted"))
    assert node_leaving(_node(None, "node.kubernetes.io/unreachable", "karpenter.sh/disruption"))
    assert not node_leaving(_node())
    assert not node_leaving(
        _node(False, "node.kubernetes.io/not-ready", "DeletionCandidateOfClusterAutoscaler")
    )
    assert not node_leaving(client.V1Node(metadata=client.V1ObjectMeta(name="n")))  # no spec
