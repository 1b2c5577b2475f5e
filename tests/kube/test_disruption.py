"""Busy pods protected from voluntary disruption, and the drain flag, on a
real API server (issue 23, items 1 and 2).  No kubelet runs here: pods are
created directly (labelled like the Deployment's, without the ReplicaSet's
pod-template-hash, so no ReplicaSet adopts them) on Node objects the test
creates; that is enough, the controller only reads and patches them.

- busy pods get ``safe-to-evict: "false"``, ``do-not-disrupt: "true"`` and the
  ``taskscale.io/busy`` label; idle ones lose them, on every pass;
- a stale mark survives no controller restart: a NEW controller removes it on
  its first pass;
- a cordoned node, or one tainted for removal, flags its pods in Redis
  (``{ns}:draining``); uncordoning clears the flag, and so does the pod going.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import enqueue, register_worker, start_tasks
from support.kube import (
    LABELS,
    controller_settings,
    create_scaler,
    deployment,
    event_reasons,
    events,
    get_scaler,
    taskscaler,
)
from support.kube_cluster import wait_for
from taskscale.controller.kube import KubeController
from taskscale.controller.kube_client import BUSY_LABEL, DO_NOT_DISRUPT, SAFE_TO_EVICT
from taskscale.controller.metrics import ControllerMetrics
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]

TARGET = "email-worker"
MARKED = {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"}


def _pod(core: client.CoreV1Api, ns: str, name: str, node: str, *, marked: bool = False) -> None:
    labels = {**LABELS, "deployment": TARGET}
    annotations: dict[str, str] = {}
    if marked:  # as a controller that died left it
        labels[BUSY_LABEL] = "true"
        annotations.update(MARKED)
    container = client.V1Container(name="worker", image="registry.invalid/taskscale/none:0")
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels=labels, annotations=annotations),
            spec=client.V1PodSpec(containers=[container], node_name=node),
        ),
    )


def _marks(core: client.CoreV1Api, ns: str, pod: str) -> tuple[str | None, dict[str, str]]:
    meta: Any = core.read_namespaced_pod(pod, ns).metadata
    annotations = {k: v for k, v in (meta.annotations or {}).items() if k in MARKED}
    return (meta.labels or {}).get(BUSY_LABEL), annotations


def _is_marked(core: client.CoreV1Api, ns: str, pod: str) -> bool:
    return _marks(core, ns, pod) == ("true", MARKED)


def _is_unmarked(core: client.CoreV1Api, ns: str, pod: str) -> bool:
    return _marks(core, ns, pod) == (None, {})


def _controller(api: client.ApiClient, ns: str) -> KubeController:
    ctl = KubeController(
        api, metrics=ControllerMetrics(), identity="test", settings=controller_settings(ns)
    )
    ctl.start()
    return ctl


def _setup(api: client.ApiClient, ns: str, redis_url: str) -> None:
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment(TARGET, 0))
    create_scaler(api, ns, taskscaler("emails", TARGET, redis_url, maxReplicas=2))


def test_busy_pods_are_marked_idle_ones_unmarked_and_a_new_controller_clears_stale_marks(
    api: client.ApiClient,
    kube_namespace: str,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(api)
    _pod(core, ns, "busy-pod", node)
    _pod(core, ns, "idle-pod", node, marked=True)  # a stale mark from before
    register_worker(r, keys, worker_id="w-busy", pod="busy-pod", types="email", busy=1)
    register_worker(r, keys, worker_id="w-idle", pod="idle-pod", types="email", busy=0)
    enqueue(r, keys, "email", 1)
    start_tasks(r, keys, "email", 1)
    _setup(api, ns, redis_url)

    first = _controller(api, ns)
    try:
        wait_for(lambda: _is_marked(core, ns, "busy-pod"), what="the busy pod marked")
        wait_for(lambda: _is_unmarked(core, ns, "idle-pod"), what="the stale mark removed")
        metrics = first.metrics
        assert metrics.sample("taskscale_pods_protected", {"namespace": ns, "name": "emails"}) == 1
    finally:
        first.stop()

    # the task ends while no controller runs; the busy pod keeps its stale mark
    register_worker(r, keys, worker_id="w-busy", pod="busy-pod", types="email", busy=0)
    assert _is_marked(core, ns, "busy-pod")
    second = _controller(api, ns)
    try:
        wait_for(lambda: _is_unmarked(core, ns, "busy-pod"), what="a new controller unmarks")
    finally:
        second.stop()


def test_a_user_annotation_on_an_unlabelled_idle_pod_is_left_alone(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(api)
    _pod(core, ns, "own-pod", node)
    core.patch_namespaced_pod(
        "own-pod", ns, {"metadata": {"annotations": {DO_NOT_DISRUPT: "true"}}}
    )
    _pod(core, ns, "busy-pod", node)
    register_worker(r, keys, worker_id="w-busy", pod="busy-pod", types="email", busy=1)
    _setup(api, ns, redis_url)
    wait_for(lambda: _is_marked(core, ns, "busy-pod"), what="the pass ran")
    assert _marks(core, ns, "own-pod") == (None, {DO_NOT_DISRUPT: "true"})


@pytest.mark.parametrize(
    "leave",
    [
        {"spec": {"unschedulable": True}},
        {"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]}},
        {"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}},
    ],
    ids=["cordoned", "cluster-autoscaler", "karpenter"],
)
def test_a_leaving_node_flags_its_pods_and_coming_back_clears_the_flag(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
    leave: dict[str, Any],
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(api)
    _pod(core, ns, "worker-a", node)
    _pod(core, ns, "worker-b", node)
    register_worker(r, keys, worker_id="w-a", pod="worker-a", types="email", busy=1)
    _setup(api, ns, redis_url)
    wait_for(lambda: _is_marked(core, ns, "worker-a"), what="the first passes")
    assert not r.exists(keys.draining)

    core.patch_node(node, leave)
    wait_for(lambda: r.hlen(keys.draining) == 2, what="both pods flagged")
    since = int(r.hget(keys.draining, "worker-a") or 0)
    assert since > 0
    assert _is_marked(core, ns, "worker-a")  # still busy: still protected

    back = {"spec": {"unschedulable": False, "taints": None}}
    core.patch_node(node, back)
    wait_for(lambda: not r.exists(keys.draining), what="the flags cleared")


def test_the_flag_of_a_pod_that_is_gone_is_cleared(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(api)
    _pod(core, ns, "worker-a", node)
    r.hset(keys.draining, "long-gone-pod", 1)  # a drained pod, deleted while no controller ran
    core.patch_node(node, {"spec": {"unschedulable": True}})
    _setup(api, ns, redis_url)
    wait_for(lambda: r.hkeys(keys.draining) == [b"worker-a"], what="the gone pod's flag cleared")
    core.delete_namespaced_pod("worker-a", ns, grace_period_seconds=0)
    wait_for(lambda: not r.exists(keys.draining), what="the deleted pod's flag cleared")


def test_status_events_and_metrics_follow_a_drain_that_waits_for_the_task(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(api)
    _pod(core, ns, "worker-a", node)
    register_worker(r, keys, worker_id="w-a", pod="worker-a", types="email", busy=1)
    _setup(api, ns, redis_url)
    wait_for(lambda: get_scaler(api, ns, "emails").get("status", {}).get("protectedPods") == 1)
    assert get_scaler(api, ns, "emails")["status"]["drainingPods"] == 0

    core.patch_node(node, {"spec": {"unschedulable": True}})
    wait_for(lambda: get_scaler(api, ns, "emails")["status"].get("drainingPods") == 1)
    wait_for(lambda: "PodDraining" in event_reasons(api, ns, "emails"), what="PodDraining")
    assert _is_marked(core, ns, "worker-a")  # the PDB still holds it
    labels = {"namespace": ns, "name": "emails"}
    assert controller.metrics.sample("taskscale_pods_draining", labels) == 1

    register_worker(r, keys, worker_id="w-a", pod="worker-a", types="email", busy=0)
    wait_for(lambda: _is_unmarked(core, ns, "worker-a"), what="unmarked once idle")
    wait_for(lambda: "PodDrained" in event_reasons(api, ns, "emails"), what="PodDrained")
    [drained] = [e for e in events(api, ns, "emails") if e.reason == "PodDrained"]
    assert "pod worker-a: its tasks ended after" in drained.message
    assert controller.metrics.sample("taskscale_drain_wait_seconds_count", labels) == 1
    wait_for(lambda: get_scaler(api, ns, "emails")["status"].get("protectedPods") == 0)


def test_a_busy_draining_pod_gets_a_replacement_elsewhere(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(api)
    _pod(core, ns, "worker-a", node)
    register_worker(r, keys, worker_id="w-a", pod="worker-a", types="email", busy=1)
    enqueue(r, keys, "email", 8)
    start_tasks(r, keys, "email", 1)  # 1 running on worker-a, 7 queued
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment(TARGET, 0))
    body = taskscaler("emails", TARGET, redis_url, maxReplicas=5, tasksPerReplica=4)
    create_scaler(api, ns, body)

    def desired() -> int | None:
        return get_scaler(api, ns, "emails").get("status", {}).get("desiredReplicas")

    wait_for(lambda: desired() == 2, what="ceil(8 / 4) replicas")
    core.patch_node(node, {"spec": {"unschedulable": True}})
    # worker-a takes none of the 7 queued: ceil(7 / 4) others + worker-a
    wait_for(lambda: desired() == 3, what="a replacement for the draining pod")
    core.patch_node(node, {"spec": {"unschedulable": False}})
    wait_for(lambda: not r.exists(keys.draining), what="the flag cleared")
