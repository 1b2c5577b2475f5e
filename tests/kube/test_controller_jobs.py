"""Job mode against a real API server (with kube-controller-manager, no
node): Jobs whose pods never schedule are never duplicated, however long the
controller runs; maxReplicas caps the active Jobs; a Job whose worker
claimed lets the next task get a Job; finished Jobs beyond the history
limits are deleted.

No kubelet runs pods here: the Job controller creates each Job's pod and it
stays Pending -- exactly the pod waiting for a node that makes KEDA's
ScaledJob create duplicates.  The workers' side of Redis (a claim, a
registry record) is written with the schema's plain commands.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.controller import enqueue, register_worker, start_tasks
from support.kube import condition, create_scaler, event_reasons, get_scaler, taskscaler
from support.kube_cluster import wait_for
from taskscale.controller.job_spec import SCALER_LABEL
from taskscale.controller.kube import GROUP, PLURAL, VERSION, EventReason, KubeController
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]

#: How long the controller runs over the unschedulable pods (the issue's 60 s).
RUN_S = 60.0


def job_scaler(name: str, task_type: str, redis_url: str, **spec: Any) -> dict[str, Any]:
    """A Job-mode TaskScaler whose pods can never schedule (a nodeSelector no node has)."""
    pod = {
        "nodeSelector": {"taskscale.io/no-such-node": "true"},
        "containers": [
            {
                "name": "worker",
                "image": "registry.invalid/taskscale/none:0",
                "args": ["worker", "--once", "--types", task_type],
            }
        ],
    }
    body = taskscaler(
        name,
        "unused",
        redis_url,
        taskTypes=[{"name": task_type}],
        jobTemplate={"spec": {"backoffLimit": 0, "template": {"spec": pod}}},
        **spec,
    )
    del body["spec"]["scaleTargetRef"]
    return body


def jobs_of(batch: client.BatchV1Api, ns: str, scaler: str) -> list[Any]:
    found: list[Any] = batch.list_namespaced_job(
        ns, label_selector=f"{SCALER_LABEL}={scaler}"
    ).items
    return [j for j in found if j.metadata.deletion_timestamp is None]


def pods_of(core: client.CoreV1Api, ns: str, job: str) -> list[Any]:
    pods: list[Any] = core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items
    return pods


def test_unschedulable_job_pods_for_60_s_never_get_a_duplicate_job(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns, batch, core = kube_namespace, client.BatchV1Api(api), client.CoreV1Api(api)
    create_scaler(api, ns, job_scaler("renders", "render", redis_url, maxReplicas=10))
    create_scaler(api, ns, job_scaler("mails", "mail", redis_url, maxReplicas=3))
    for name in ("renders", "mails"):
        wait_for(lambda n=name: condition(get_scaler(api, ns, n), "Ready"), what="first status")
    enqueue(r, keys, "render", 5)
    enqueue(r, keys, "mail", 5)

    most = {"renders": 0, "mails": 0}
    claimed = False
    started = time.monotonic()
    while time.monotonic() - started < RUN_S:
        for name in most:
            most[name] = max(most[name], len(jobs_of(batch, ns, name)))
        if not claimed and time.monotonic() - started > RUN_S / 2:
            # halfway: one render pod's worker registers idle, another claims its
            # task -- the first still counts as not started, the second frees nothing
            pods = [pods_of(core, ns, j.metadata.name) for j in jobs_of(batch, ns, "renders")]
            names = [p[0].metadata.name for p in pods if p]
            assert len(names) >= 2, "the Job controller made no pods"
            register_worker(r, keys, worker_id="w-idle", pod=names[0], types="render", busy=0)
            register_worker(r, keys, worker_id="w-busy", pod=names[1], types="render", busy=1)
            start_tasks(r, keys, "render", 1)
            claimed = True
        time.sleep(0.5)

    assert most == {"renders": 5, "mails": 3}  # never more, at any sample
    assert (len(jobs_of(batch, ns, "renders")), len(jobs_of(batch, ns, "mails"))) == (5, 3)
    sample = controller.metrics.sample
    for name, created in (("renders", 5), ("mails", 3)):
        labels = {"namespace": ns, "name": name}
        assert sample("taskscale_jobs_created_total", labels) == created
        assert EventReason.JOBS_CREATED in event_reasons(api, ns, name)
    status = get_scaler(api, ns, "renders")["status"]
    assert status["jobs"] == {"pending": 4, "running": 1, "succeeded": 0, "failed": 0}
    assert get_scaler(api, ns, "mails")["status"]["jobs"]["pending"] == 3
    assert sample("taskscale_jobs", {"namespace": ns, "name": "mails", "phase": "pending"}) == 3

    # the claimed task done and a new one queued: exactly one more Job
    enqueue(r, keys, "render", 1)
    wait_for(lambda: len(jobs_of(batch, ns, "renders")) == 6, what="a Job for the new task")
    time.sleep(2.0)
    assert len(jobs_of(batch, ns, "renders")) == 6


def finish_pod(core: client.CoreV1Api, ns: str, job: str, phase: str) -> None:
    """Say the Job's pod ended (no kubelet here to say it): the Job controller
    then marks the Job Complete or Failed."""
    wait_for(lambda: pods_of(core, ns, job), what=f"a pod of {job}")
    pod = pods_of(core, ns, job)[0]
    core.patch_namespaced_pod_status(pod.metadata.name, ns, {"status": {"phase": phase}})


def test_finished_jobs_beyond_the_history_limits_are_deleted(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns, batch, core = kube_namespace, client.BatchV1Api(api), client.CoreV1Api(api)
    body = job_scaler(
        "renders", "render", redis_url, successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0
    )
    create_scaler(api, ns, body)
    wait_for(lambda: condition(get_scaler(api, ns, "renders"), "Ready"), what="first status")
    enqueue(r, keys, "render", 3)
    wait_for(lambda: len(jobs_of(batch, ns, "renders")) == 3, what="three Jobs")
    start_tasks(r, keys, "render", 3)  # as if their workers claimed them
    names = sorted(j.metadata.name for j in jobs_of(batch, ns, "renders"))
    finish_pod(core, ns, names[0], "Succeeded")
    finish_pod(core, ns, names[1], "Succeeded")
    finish_pod(core, ns, names[2], "Failed")

    def kept() -> dict[str, int] | None:
        jobs = get_scaler(api, ns, "renders").get("status", {}).get("jobs")
        left = jobs_of(batch, ns, "renders")
        return jobs if len(left) == 1 and jobs and jobs["succeeded"] == 1 else None

    wait_for(kept, timeout=60, what="one successful Job kept, the rest deleted")
    assert kept() == {"pending": 0, "running": 0, "succeeded": 1, "failed": 0}
    # no Job was created for tasks that are gone from the queue
    labels = {"namespace": ns, "name": "renders"}
    assert controller.metrics.sample("taskscale_jobs_created_total", labels) == 3

    # the Jobs are the TaskScaler's: deleting it deletes them (garbage collector)
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "renders"
    )
    wait_for(lambda: not jobs_of(batch, ns, "renders"), timeout=60, what="the Jobs collected")


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"scaleTargetRef": {"name": "w"}}, "set exactly one of scaleTargetRef and jobTemplate"),
        ({"jobTemplate": None}, "set exactly one of scaleTargetRef and jobTemplate"),
        ({"minReplicas": 1}, "minReplicas must be 0 with a jobTemplate"),
        ({"successfulJobsHistoryLimit": -1}, "spec.successfulJobsHistoryLimit"),
        ({"jobTemplate": {"metadata": {}}}, "spec.jobTemplate.spec"),
    ],
)
def test_api_server_rejects_an_invalid_job_mode_spec(
    api: client.ApiClient, kube_namespace: str, change: dict[str, Any], complaint: str
) -> None:
    body = job_scaler("bad", "render", "redis://127.0.0.1:6379/0")
    body["spec"].update(change)
    if body["spec"]["jobTemplate"] is None:
        del body["spec"]["jobTemplate"]
    with pytest.raises(ApiException) as caught:
        create_scaler(api, kube_namespace, body)
    assert caught.value.status == 422
    assert complaint in str(caught.value.body)
