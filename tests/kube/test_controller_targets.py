"""Scale targets other than Deployments, against a real API server: a
StatefulSet scales 0 -> N -> 0, a custom resource with a ``scale``
subresource (its CRD defined here) scales, and a kind without one is
reported, not written to.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.controller import enqueue, finish_tasks, register_worker, start_tasks
from support.kube import condition, create_scaler, get_scaler, live_pods, taskscaler
from support.kube_cluster import wait_for
from taskscale.controller import kube
from taskscale.controller.kube import KubeController
from taskscale.controller.kube_client import DELETION_COST
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]

WIDGETS = "widgets.example.taskscale.io"


def stateful_set(name: str, replicas: int) -> client.V1StatefulSet:
    labels = {"app": "worker", "statefulset": name}
    container = client.V1Container(name="worker", image="registry.invalid/taskscale/none:0")
    return client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1StatefulSetSpec(
            replicas=replicas,
            service_name=name,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container]),
            ),
        ),
    )


def widget_crd(*, with_scale: bool) -> dict[str, Any]:
    """A tiny Rollout-like kind: spec.replicas, status.replicas, a scale subresource."""
    subresources: dict[str, Any] = {"status": {}}
    if with_scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
        }
    plural, kind = ("widgets", "Widget") if with_scale else ("gadgets", "Gadget")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.example.taskscale.io"},
        "spec": {
            "group": "example.taskscale.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": subresources,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def widgets(api: client.ApiClient) -> Iterator[None]:
    """The Widget (with scale) and Gadget (without) kinds, served."""
    custom = client.CustomObjectsApi(api)
    for with_scale in (True, False):
        kube.install_crd(api, widget_crd(with_scale=with_scale))
    for plural in ("widgets", "gadgets"):
        wait_for(
            lambda p=plural: _lists(custom, p),  # type: ignore[misc]
            timeout=60,
            what=f"{plural} to be served",
        )
    yield


def _lists(custom: client.CustomObjectsApi, plural: str) -> bool:
    try:
        custom.list_cluster_custom_object("example.taskscale.io", "v1", plural)
    except ApiException:
        return False
    return True


def sts_replicas(api: client.ApiClient, namespace: str, name: str) -> int:
    scale: Any = client.AppsV1Api(api).read_namespaced_stateful_set_scale(name, namespace)
    return int(scale.spec.replicas or 0)


def widget_replicas(api: client.ApiClient, namespace: str, name: str) -> int:
    obj: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "example.taskscale.io", "v1", namespace, "widgets", name
    )
    return int(obj["spec"]["replicas"])


def test_a_stateful_set_scales_from_zero_to_demand_and_back_to_zero(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_stateful_set(ns, stateful_set("email-worker", 0))
    ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "email-worker"}
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url, scaleTargetRef=ref))
    wait_for(lambda: condition(get_scaler(api, ns, "emails"), "Ready"), what="first status")
    assert sts_replicas(api, ns, "email-worker") == 0

    enqueue(r, keys, "email", 3)
    wait_for(lambda: sts_replicas(api, ns, "email-worker") == 3, what="StatefulSet 0 -> 3")
    start_tasks(r, keys, "email", 3)
    finish_tasks(r, keys, "email", 3)
    wait_for(lambda: sts_replicas(api, ns, "email-worker") == 0, what="StatefulSet 3 -> 0")
    ready = condition(get_scaler(api, ns, "emails"), "Ready")
    assert ready is not None and ready["status"] == "True"


def test_a_stateful_set_is_not_scaled_below_its_busy_ordinal_until_that_task_ends(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_stateful_set(ns, stateful_set("email-worker", 3))
    # one task runs, on ordinal 2 (the registry names the pod, as POD_NAME does)
    register_worker(r, keys, worker_id="w-2", pod="email-worker-2", types="email", busy=1)
    enqueue(r, keys, "email", 1)
    start_tasks(r, keys, "email", 1)
    ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "email-worker"}
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url, scaleTargetRef=ref))

    def held() -> dict[str, Any] | None:
        status = get_scaler(api, ns, "emails").get("status") or {}
        return status if "(ordinal 2) runs a task" in str(status.get("reason")) else None

    status = wait_for(held, what="the ordinal hold in the status")
    # a Deployment would go to 1 (one busy pod); the StatefulSet would remove ordinal 2
    assert status["reasonCode"] == "HoldActive"
    assert status["desiredReplicas"] == 3
    deadline = time.monotonic() + 3  # ten passes at 0.3 s
    while time.monotonic() < deadline:
        assert sts_replicas(api, ns, "email-worker") == 3
        time.sleep(0.2)

    finish_tasks(r, keys, "email", 1)
    register_worker(r, keys, worker_id="w-2", pod="email-worker-2", types="email", busy=0)
    wait_for(lambda: sts_replicas(api, ns, "email-worker") == 0, what="StatefulSet 3 -> 0")


def test_a_stateful_sets_pods_get_no_pod_deletion_cost_which_it_would_ignore(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    core = client.CoreV1Api(api)
    client.AppsV1Api(api).create_namespaced_stateful_set(ns, stateful_set("email-worker", 3))
    # ordinal 0 is created first (and, with no kubelet, is never Ready: the only one)
    wait_for(lambda: live_pods(core, ns, "statefulset=email-worker"), what="pod email-worker-0")
    register_worker(r, keys, worker_id="w-0", pod="email-worker-0", types="email", busy=1)
    enqueue(r, keys, "email", 1)
    start_tasks(r, keys, "email", 1)
    ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "email-worker"}
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url, scaleTargetRef=ref))

    wait_for(lambda: sts_replicas(api, ns, "email-worker") == 1, what="StatefulSet 3 -> 1")
    pod: Any = core.read_namespaced_pod("email-worker-0", ns)
    assert DELETION_COST not in (pod.metadata.annotations or {})


def test_a_custom_resource_with_a_scale_subresource_scales(
    api: client.ApiClient,
    widgets: None,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    custom = client.CustomObjectsApi(api)
    widget = {
        "apiVersion": "example.taskscale.io/v1",
        "kind": "Widget",
        "metadata": {"name": "email-worker"},
        "spec": {"replicas": 0, "color": "blue"},
    }
    custom.create_namespaced_custom_object("example.taskscale.io", "v1", ns, "widgets", widget)
    ref = {"apiVersion": "example.taskscale.io/v1", "kind": "Widget", "name": "email-worker"}
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url, scaleTargetRef=ref))

    enqueue(r, keys, "email", 2)
    wait_for(lambda: widget_replicas(api, ns, "email-worker") == 2, what="Widget 0 -> 2")
    obj: Any = custom.get_namespaced_custom_object(
        "example.taskscale.io", "v1", ns, "widgets", "email-worker"
    )
    assert obj["spec"]["color"] == "blue"  # only the scale subresource was written
    start_tasks(r, keys, "email", 2)
    finish_tasks(r, keys, "email", 2)
    wait_for(lambda: widget_replicas(api, ns, "email-worker") == 0, what="Widget 2 -> 0")


def test_a_kind_without_a_scale_subresource_is_reported_and_not_written(
    api: client.ApiClient,
    widgets: None,
    kube_namespace: str,
    controller: KubeController,
    redis_url: str,
) -> None:
    ns = kube_namespace
    custom = client.CustomObjectsApi(api)
    gadget = {
        "apiVersion": "example.taskscale.io/v1",
        "kind": "Gadget",
        "metadata": {"name": "email-worker"},
        "spec": {"replicas": 1},
    }
    custom.create_namespaced_custom_object("example.taskscale.io", "v1", ns, "gadgets", gadget)
    ref = {"apiVersion": "example.taskscale.io/v1", "kind": "Gadget", "name": "email-worker"}
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url, scaleTargetRef=ref))

    def not_ready() -> dict[str, Any] | None:
        c = condition(get_scaler(api, ns, "emails"), "Ready")
        return c if c and c["status"] == "False" else None

    ready = wait_for(not_ready, what="Ready=False")
    assert ready["reason"] == "TargetNotFound"
    assert "has no scale subresource" in ready["message"]
