"""Two TaskScalers naming one Deployment, on a real API server: the first by
name scales it; the second reports Ready=False / TargetConflict with a
Warning Event and never writes the Deployment, until the first is deleted
(controller/target_owner.py)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import enqueue
from support.kube import (
    condition,
    create_scaler,
    deployment,
    event_reasons,
    get_scaler,
    replicas,
    taskscaler,
)
from support.kube_cluster import wait_for
from taskscale.controller.kube import GROUP, PLURAL, VERSION, KubeController
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]

TARGET = "email-worker"


def _ready(api: client.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
    return condition(get_scaler(api, ns, name), "Ready")


def test_the_second_scaler_of_a_deployment_reports_the_conflict_and_changes_nothing(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment(TARGET, 0))
    enqueue(r, keys, "email", 3)
    # the owner scales at most to 2, the other would go to 5
    create_scaler(api, ns, taskscaler("a-emails", TARGET, redis_url, maxReplicas=2))
    create_scaler(api, ns, taskscaler("b-emails", TARGET, redis_url, maxReplicas=5))

    def conflict() -> dict[str, Any] | None:
        ready = _ready(api, ns, "b-emails")
        return ready if ready and ready["reason"] == "TargetConflict" else None

    ready = wait_for(conflict, what="Ready=False, TargetConflict")
    assert ready["status"] == "False"
    assert "is scaled by TaskScaler a-emails" in ready["message"]
    wait_for(lambda: "TargetConflict" in event_reasons(api, ns, "b-emails"), what="the Event")
    wait_for(lambda: replicas(api, ns, TARGET) == 2, what="the owner's size")
    assert (_ready(api, ns, "a-emails") or {}).get("status") == "True"

    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "a-emails"
    )
    wait_for(lambda: replicas(api, ns, TARGET) == 3, what="the second scaler taking over")
    wait_for(lambda: (_ready(api, ns, "b-emails") or {}).get("status") == "True")
