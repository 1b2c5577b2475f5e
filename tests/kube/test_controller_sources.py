"""Observer sources on a real API server: the CRD accepts ``source``,
``queues`` and ``tasks`` (and refuses what it can't apply), and the controller
scales a Deployment from an RQ queue -- up for queued and soon-due jobs, down
to 0 once real RQ workers (started by the test: no kubelet runs pods here)
have run them all."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from rq import Queue

from support.kube import create_scaler, deployment, get_scaler, replicas, taskscaler
from support.kube_cluster import wait_for
from support.workers import process_env
from taskscale.controller.kube import KubeController
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"source": "sidekiq"}, "spec.source"),
        ({"taskTypes": [{"name": "a", "source": "kafka"}]}, "spec.taskTypes[0].source"),
        ({"taskTypes": [{"name": "a", "queues": []}]}, "spec.taskTypes[0].queues"),
        ({"taskTypes": [{"name": "a", "queues": ["a b"]}]}, "spec.taskTypes[0].queues[0]"),
        ({"taskTypes": [{"name": "a", "tasks": ["x:y"]}]}, "spec.taskTypes[0].tasks[0]"),
    ],
)
def test_api_server_rejects_a_bad_source(
    api: client.ApiClient, kube_namespace: str, change: dict[str, Any], complaint: str
) -> None:
    body = taskscaler("bad", "worker", "redis://127.0.0.1:6379/0", **change)
    with pytest.raises(ApiException) as caught:
        create_scaler(api, kube_namespace, body)
    assert caught.value.status == 422
    assert complaint in str(caught.value.body)


def test_api_server_defaults_the_source_to_taskscale_and_keeps_queues_and_tasks(
    api: client.ApiClient, kube_namespace: str
) -> None:
    plain = create_scaler(api, kube_namespace, taskscaler("plain", "w", "redis://h:1/0"))
    assert plain["spec"]["source"] == "taskscale"
    mail = {"name": "mail", "source": "celery", "queues": ["mail", "mail-bulk"], "tasks": ["a.b"]}
    spec = create_scaler(
        api, kube_namespace, taskscaler("mixed", "w", "redis://h:1/0", taskTypes=[mail])
    )["spec"]
    assert spec["taskTypes"][0] == {**mail, "idleThresholdSeconds": 300}


@pytest.mark.slow
def test_an_rq_source_scales_a_deployment_up_for_queued_and_soon_due_jobs_and_back_to_zero(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    tmp_path: Path,
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("report-worker", 0))
    reports = {"name": "reports", "tasks": ["source_apps.quick"], "idleThresholdSeconds": 1}
    body = taskscaler("reports", "report-worker", redis_url, source="rq", taskTypes=[reports])
    create_scaler(api, ns, body)
    q = Queue("reports", connection=r)
    q.enqueue("source_apps.quick")
    q.enqueue("source_apps.quick")
    q.enqueue_in(timedelta(seconds=12), "source_apps.quick")  # inside the 30 s warm-up lead

    wait_for(lambda: replicas(api, ns, "report-worker") == 3, what="0 -> 3 (2 queued, 1 soon)")
    # the status of the pass that scaled (patched just after the scale)
    wait_for(
        lambda: observed(get_scaler(api, ns, "reports")) == {"queued": 2, "upcoming": 1},
        what="status: 2 queued, 1 upcoming",
    )

    run_rq_worker(redis_url, keys, tmp_path)  # runs the two queued jobs, then exits
    wait_for(lambda: replicas(api, ns, "report-worker") == 1, what="3 -> 1 (1 due soon)")
    wait_for(
        lambda: observed(get_scaler(api, ns, "reports")) == {"queued": 1, "upcoming": 0},
        what="status: the soon-due job is due (queued, RQ's rule)",
    )
    assert replicas(api, ns, "report-worker") == 1

    run_rq_worker(redis_url, keys, tmp_path)  # its scheduler queues the due job and runs it
    wait_for(lambda: replicas(api, ns, "report-worker") == 0, what="1 -> 0 once idle")
    assert r.hget(keys.active, "source_apps.quick") == b"0"  # counted by the RQ integration


def observed(scaler: dict[str, Any]) -> dict[str, Any]:
    """The status's queued and upcoming counts of the type (empty before a status)."""
    rows = (scaler.get("status") or {}).get("observations") or []
    row = next((row for row in rows if row["type"] == "reports"), {})
    return {k: row[k] for k in ("queued", "upcoming") if k in row}


def run_rq_worker(redis_url: str, keys: Keys, tmp_path: Path) -> None:
    """One real ``rq worker --burst --with-scheduler`` with the taskscale integration."""
    env = process_env(
        redis_url, {"SOURCES_REDIS_URL": redis_url, "TASKSCALE_NAMESPACE": keys.namespace}
    )
    command = [sys.executable, "-m", "rq.cli", "worker", "--burst", "--with-scheduler"]
    command += ["-w", "taskscale.integrations.rq.TrackingSimpleWorker", "--url", redis_url]
    with open(tmp_path / "rq.log", "ab") as log:
        subprocess.run(
            [*command, "reports"], env=env, stdout=log, stderr=subprocess.STDOUT, timeout=120
        )
