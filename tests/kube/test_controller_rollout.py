"""The rollout hold against a real API server (rules/rollout_hold.py): the
Deployment controller runs, no kubelet does, so a rollout with maxUnavailable
0 never gets its new pod Ready and stays in progress until it is rolled back.
While it is in progress the controller does not scale the Deployment down
(status ``rolloutHold``, reason code and Event ``RolloutHold``); once it has
ended it does (Event ``RolloutHoldEnded``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from kubernetes import client

from support.kube import (
    create_scaler,
    deployment,
    event_reasons,
    get_scaler,
    replicas,
    taskscaler,
)
from support.kube_cluster import wait_for
from taskscale.controller.kube import KubeController
from taskscale.controller.scale_target import rollout_of

pytestmark = [pytest.mark.kube, pytest.mark.integration]


def surge_deployment(name: str, replicas: int) -> client.V1Deployment:
    """:func:`deployment` with the chart's strategy: a surge, nothing unavailable."""
    body = deployment(name, replicas)
    body.spec.strategy = client.V1DeploymentStrategy(
        type="RollingUpdate",
        rolling_update=client.V1RollingUpdateDeployment(max_surge=1, max_unavailable=0),
    )
    return body


def set_env(apps: client.AppsV1Api, ns: str, name: str, value: str) -> None:
    """A template change (``kubectl set env``): a new revision to roll out."""
    env = [{"name": "REVISION", "value": value}]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "worker", "env": env}]}}}}
    apps.patch_namespaced_deployment(name, ns, patch)


def ready_every_pod(core: client.CoreV1Api, ns: str) -> None:
    """Mark every live pod of ``ns`` Running and Ready, as a kubelet would."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": now}
    for pod in core.list_namespaced_pod(ns).items:
        conditions = pod.status.conditions or []
        if pod.metadata.deletion_timestamp is None and not any(
            c.type == "Ready" and c.status == "True" for c in conditions
        ):
            body = {"status": {"phase": "Running", "conditions": [ready]}}
            core.patch_namespaced_pod_status(pod.metadata.name, ns, body)


def test_a_scale_down_waits_while_the_deployment_rolls_out_and_happens_after(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
) -> None:
    ns, apps = kube_namespace, client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, surge_deployment("email-worker", 3))

    def status() -> Any:
        return rollout_of(apps.read_namespaced_deployment_status("email-worker", ns))

    # created: every pod is of the one revision (none Ready: that holds nothing)
    wait_for(lambda: status().updated == 3 and not status().waiting_for(), what="first rollout")
    set_env(apps, ns, "email-worker", "2")
    wait_for(lambda: status().waiting_for(), what="the rollout to start")

    # nothing to do: the policy asks for 0, the rollout holds 3
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url))

    def held() -> dict[str, Any] | None:
        st = get_scaler(api, ns, "emails").get("status") or {}
        return st if st.get("rolloutHold") is True else None

    st = wait_for(held, what="the rollout hold in the status")
    assert (st["reasonCode"], st["desiredReplicas"]) == ("RolloutHold", 3)
    assert "until the Deployment's rollout ends (" in st["reason"]
    deadline = time.monotonic() + 2  # several passes at 0.3 s
    while time.monotonic() < deadline:
        assert replicas(api, ns, "email-worker") == 3
        time.sleep(0.2)
    assert "RolloutHold" in event_reasons(api, ns, "emails")

    # the new pods become Ready (no kubelet: set as one would): the rollout ends
    core = client.CoreV1Api(api)

    def rolled_out() -> bool:
        ready_every_pod(core, ns)
        return not status().waiting_for()

    wait_for(rolled_out, what="the rollout to end")
    wait_for(lambda: replicas(api, ns, "email-worker") == 0, what="scale-down after the rollout")
    wait_for(
        lambda: get_scaler(api, ns, "emails").get("status", {}).get("rolloutHold") is False,
        what="rolloutHold false",
    )
    assert "RolloutHoldEnded" in event_reasons(api, ns, "emails")
