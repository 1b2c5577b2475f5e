"""Job-mode pods protected like a Deployment's, on a real API server (issue
23): a Job pod whose worker runs a task is marked against voluntary
disruption (a consolidation or drain would cut an hours-long task), loses
the marks when its task ends, and is flagged draining in Redis, so it
claims nothing, while its node is cordoned.

The Job controller (kube-controller-manager) creates each Job's pod; the pod
template names the test's Node object (no kubelet behind it), so the pod is
bound there and stays Pending.  The worker's side of Redis is written with
the schema's plain commands, as in test_controller_jobs.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import enqueue, register_worker, start_tasks
from support.kube import create_scaler, get_scaler, taskscaler
from support.kube_cluster import wait_for
from taskscale.controller.job_spec import SCALER_LABEL
from taskscale.controller.kube import KubeController
from taskscale.controller.kube_client import BUSY_LABEL, DO_NOT_DISRUPT, SAFE_TO_EVICT
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]

MARKS = {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"}


def _job_scaler(node: str, redis_url: str) -> dict[str, Any]:
    """A Job-mode TaskScaler whose pods are bound to ``node`` and never run."""
    pod = {
        "nodeName": node,
        "containers": [
            {"name": "worker", "image": "registry.invalid/taskscale/none:0", "args": ["worker"]}
        ],
    }
    body = taskscaler(
        "reports",
        "unused",
        redis_url,
        taskTypes=[{"name": "report"}],
        maxReplicas=1,
        jobTemplate={"spec": {"backoffLimit": 0, "template": {"spec": pod}}},
    )
    del body["spec"]["scaleTargetRef"]
    return body


def _marks(core: client.CoreV1Api, ns: str, pod: str) -> tuple[str | None, dict[str, str]]:
    meta: Any = core.read_namespaced_pod(pod, ns).metadata
    annotations = {k: v for k, v in (meta.annotations or {}).items() if k in MARKS}
    return (meta.labels or {}).get(BUSY_LABEL), annotations


def _jobs(batch: client.BatchV1Api, ns: str) -> list[Any]:
    found: list[Any] = batch.list_namespaced_job(ns, label_selector=f"{SCALER_LABEL}=reports").items
    return found


def _the_job_pod(core: client.CoreV1Api, batch: client.BatchV1Api, ns: str) -> str | None:
    jobs = _jobs(batch, ns)
    if len(jobs) != 1:
        return None
    selector = f"job-name={jobs[0].metadata.name}"
    pods = core.list_namespaced_pod(ns, label_selector=selector).items
    return str(pods[0].metadata.name) if len(pods) == 1 else None


def test_a_busy_job_pod_is_marked_flagged_on_a_cordoned_node_and_unmarked_when_idle(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    node: str,
) -> None:
    ns, core, batch = kube_namespace, client.CoreV1Api(api), client.BatchV1Api(api)
    enqueue(r, keys, "report", 1)
    create_scaler(api, ns, _job_scaler(node, redis_url))
    pod = wait_for(lambda: _the_job_pod(core, batch, ns), what="one Job and its pod")
    assert _marks(core, ns, pod) == (None, {})  # no worker yet: not busy

    # the Job's worker claims the task
    register_worker(r, keys, worker_id="w-job", pod=pod, types="report", busy=1)
    start_tasks(r, keys, "report", 1)
    wait_for(lambda: _marks(core, ns, pod) == ("true", MARKS), what="the busy Job pod marked")
    wait_for(lambda: get_scaler(api, ns, "reports").get("status", {}).get("protectedPods") == 1)

    core.patch_node(node, {"spec": {"unschedulable": True}})
    wait_for(lambda: r.hkeys(keys.draining) == [pod.encode()], what="the Job pod flagged")
    assert _marks(core, ns, pod) == ("true", MARKS)  # still running its task: still marked

    register_worker(r, keys, worker_id="w-job", pod=pod, types="report", busy=0)
    wait_for(lambda: _marks(core, ns, pod) == (None, {}), what="unmarked once its task ended")
    core.patch_node(node, {"spec": {"unschedulable": False}})
    wait_for(lambda: not r.exists(keys.draining), what="the flag cleared")
    assert len(_jobs(batch, ns)) == 1  # protection created no Job
