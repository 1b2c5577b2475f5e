"""What `kubectl get tsc` and `kubectl describe tsc` tell an operator, on a real
API server: a failing scaler's Reason and Message columns say why it fails,
and tasksPerReplica that disagrees with the worker pods' threads is a
ThreadsMatch=False condition and a Warning Event, cleared when they agree.

Pods never run here (no kubelet): kube-controller-manager creates them, so
they have real Deployment pod names, and the workers' registry records are
written with the schema's plain commands, naming those pods.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import register_worker
from support.kube import (
    as_table,
    condition,
    create_scaler,
    deployment,
    events,
    get_scaler,
    live_pods,
    taskscaler,
)
from support.kube_cluster import wait_for
from taskscale.controller.kube import GROUP, PLURAL, VERSION, EventReason, KubeController
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]


def table_row(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """The row `kubectl get tsc NAME -o wide` prints, by column name."""
    table = as_table(api, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/tsc/{name}")
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


def warnings_with(api: client.ApiClient, namespace: str, name: str, reason: str) -> list[str]:
    return [
        str(e.message)
        for e in events(api, namespace, name)
        if e.reason == reason and e.type == ("Warning" if "Mismatch" in reason else "Normal")
    ]


def test_a_failing_scaler_shows_its_problem_in_the_reason_and_message_columns(
    api: client.ApiClient, kube_namespace: str, controller: KubeController, redis_url: str
) -> None:
    ns = kube_namespace
    create_scaler(api, ns, taskscaler("emails", "no-such-worker", redis_url))

    def failing_row() -> dict[str, Any] | None:
        row = table_row(api, ns, "emails")
        return row if row["Ready"] == "False" else None

    row = wait_for(failing_row, what="Ready=False in the table")
    assert row["Reason"] == "TargetNotFound"
    assert "no-such-worker" in row["Message"] and "not found" in row["Message"]

    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("no-such-worker", 0))

    def recovered_row() -> dict[str, Any] | None:
        row = table_row(api, ns, "emails")
        return row if row["Ready"] == "True" else None

    row = wait_for(recovered_row, what="Ready=True in the table")
    assert row["Reason"] != "TargetNotFound" and row["Message"]


def test_an_invalid_spec_shows_in_the_reason_and_message_columns(
    api: client.ApiClient, kube_namespace: str, controller: KubeController
) -> None:
    ns = kube_namespace
    body = taskscaler("emails", "email-worker", "unused")
    body["spec"]["redis"] = {"urlSecretRef": {"name": "missing", "key": "url"}}
    create_scaler(api, ns, body)

    def failing_row() -> dict[str, Any] | None:
        row = table_row(api, ns, "emails")
        return row if row["Ready"] == "False" else None

    row = wait_for(failing_row, what="Ready=False in the table")
    assert row["Reason"] == EventReason.SECRET_UNAVAILABLE
    assert "does not exist" in row["Message"]


def test_tasks_per_replica_unlike_the_pods_threads_is_a_condition_and_a_warning_until_fixed(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    core = client.CoreV1Api(api)
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 2))

    def two_pods() -> list[str] | None:
        live = sorted(live_pods(core, ns, "deployment=email-worker"))
        return live if len(live) == 2 else None

    pods = wait_for(two_pods, what="two pods")
    for i, pod in enumerate(pods):
        register_worker(r, keys, worker_id=f"w{i}", pod=pod, types="email", busy=0, threads=4)
    # A worker of another Deployment serving the same type says nothing about this one.
    register_worker(r, keys, worker_id="other", pod="batch-7f9c-abcde", types="email", busy=0)
    scaler = taskscaler(
        "emails", "email-worker", redis_url, minReplicas=2, maxReplicas=2, tasksPerReplica=1
    )
    create_scaler(api, ns, scaler)

    def mismatch() -> dict[str, Any] | None:
        c = condition(get_scaler(api, ns, "emails"), "ThreadsMatch")
        return c if c and c["status"] == "False" else None

    found = wait_for(mismatch, what="ThreadsMatch=False")
    assert found["reason"] == EventReason.THREADS_MISMATCH
    assert "tasksPerReplica is 1" in found["message"] and "4 threads" in found["message"]
    assert all(pod in found["message"] for pod in pods)
    warned = wait_for(
        lambda: warnings_with(api, ns, "emails", EventReason.THREADS_MISMATCH),
        what="a TasksPerReplicaMismatch Warning",
    )
    assert warned == [found["message"]]
    assert condition(get_scaler(api, ns, "emails"), "Ready")["status"] == "True"  # type: ignore[index]

    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "emails", {"spec": {"tasksPerReplica": 4}}
    )

    def matches() -> dict[str, Any] | None:
        c = condition(get_scaler(api, ns, "emails"), "ThreadsMatch")
        return c if c and c["status"] == "True" else None

    cleared = wait_for(matches, what="ThreadsMatch=True after the fix")
    assert "2 live" in cleared["message"]
    wait_for(
        lambda: warnings_with(api, ns, "emails", EventReason.THREADS_MATCH),
        what="a TasksPerReplicaMatches Event",
    )
    # One Warning for the whole episode, not one per pass.
    assert len(warnings_with(api, ns, "emails", EventReason.THREADS_MISMATCH)) == 1
