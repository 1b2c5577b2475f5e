"""The local node really runs pods: containers start, get a pod IP, serve, stop.

This is what the end-to-end suite stands on where kind can't run: an image
made here is imported into the node's containerd, a Deployment's pods become
Ready, the host reaches them over the CNI bridge, and scaling to zero through
the ``scale`` subresource really stops them (a bound pod only goes away once
the kubelet has killed its containers).
"""

from __future__ import annotations

import urllib.request

import pytest
from kubernetes import client

from support.kube_cluster import KubeCluster, wait_for

pytestmark = [pytest.mark.kube, pytest.mark.e2e]

LABELS = {"app": "hello"}
SERVE = (
    "busybox mkdir -p /www && echo hello from $HOSTNAME > /www/index.html"
    " && exec busybox httpd -f -p 8080 -h /www"
)


def _ready_pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    ready = []
    for pod in core.list_namespaced_pod(namespace, label_selector="app=hello").items:
        conditions = (pod.status.conditions or []) if pod.status else []
        if any(c.type == "Ready" and c.status == "True" for c in conditions):
            ready.append(pod)
    return ready


def test_pods_run_serve_and_stop_on_scale_to_zero(
    kube_node_cluster: KubeCluster, kube_namespace: str, busybox_image: str
) -> None:
    container = client.V1Container(
        name="hello",
        image=busybox_image,
        image_pull_policy="Never",
        args=["sh", "-c", SERVE],
        readiness_probe=client.V1Probe(
            http_get=client.V1HTTPGetAction(path="/", port=8080), period_seconds=1
        ),
    )
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="hello"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=LABELS),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=LABELS),
                spec=client.V1PodSpec(containers=[container], termination_grace_period_seconds=2),
            ),
        ),
    )
    with kube_node_cluster.api_client() as api:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_deployment(kube_namespace, deployment)

        def two_ready() -> list[client.V1Pod] | None:
            pods = _ready_pods(core, kube_namespace)
            return pods if len(pods) == 2 else None

        pods = wait_for(two_ready, timeout=120, what="2 Ready pods on the node")
        for pod in pods:
            assert pod.status is not None and pod.metadata is not None
            with urllib.request.urlopen(f"http://{pod.status.pod_ip}:8080/", timeout=5) as reply:
                assert reply.read().decode().strip() == f"hello from {pod.metadata.name}"

        apps.patch_namespaced_deployment_scale("hello", kube_namespace, {"spec": {"replicas": 0}})
        wait_for(
            lambda: not core.list_namespaced_pod(kube_namespace, label_selector="app=hello").items,
            timeout=60,
            what="the kubelet to stop both pods",
        )
