"""The overrides of the policy against a real API server and a real Redis:
the pause annotations (hold, or set and hold N, through load; resume) and
``spec.fallback`` (Redis stopped -> N after K failed passes; Redis back ->
the policy again).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import enqueue
from support.kube import (
    as_table,
    condition,
    create_scaler,
    deployment,
    event_reasons,
    get_scaler,
    replicas,
    taskscaler,
)
from support.kube_cluster import wait_for
from support.redis_server import RedisServer, free_port
from taskscale.controller.kube import GROUP, PLURAL, VERSION, EventReason, KubeController
from taskscale.controller.rules.base import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]

#: Long enough for several 0.3 s passes.
SEVERAL_PASSES_S = 2.0


def annotate(api: client.ApiClient, namespace: str, name: str, **values: str | None) -> None:
    """Set (or, with None, remove) annotations on a TaskScaler."""
    patch = {"metadata": {"annotations": dict(values)}}
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, patch
    )


def status(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return dict(get_scaler(api, namespace, name).get("status") or {})


def test_paused_replicas_sets_and_holds_n_through_load_and_unpausing_resumes(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 0))
    body = taskscaler("emails", "email-worker", redis_url)
    body["metadata"]["annotations"] = {PAUSED_REPLICAS_ANNOTATION: "2"}
    create_scaler(api, ns, body)
    wait_for(lambda: replicas(api, ns, "email-worker") == 2, what="paused-replicas sets 2")

    enqueue(r, keys, "email", 4)  # the policy would ask for 4
    time.sleep(SEVERAL_PASSES_S)
    assert replicas(api, ns, "email-worker") == 2
    st = wait_for(
        lambda: (s := status(api, ns, "emails")).get("paused") and s, what="status paused"
    )
    assert (st["pausedReplicas"], st["reasonCode"]) == (2, "Paused")
    paused = condition(get_scaler(api, ns, "emails"), "Paused")
    assert paused is not None and paused["status"] == "True"
    assert PAUSED_REPLICAS_ANNOTATION in paused["message"]
    wait_for(lambda: EventReason.PAUSED in event_reasons(api, ns, "emails"), what="Paused event")
    table = as_table(api, f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/tsc/emails")
    names = [c["name"] for c in table["columnDefinitions"]]
    assert dict(zip(names, table["rows"][0]["cells"], strict=True))["Paused"] is True

    annotate(api, ns, "emails", **{PAUSED_REPLICAS_ANNOTATION: None})
    wait_for(lambda: replicas(api, ns, "email-worker") == 4, what="resumed: 2 -> 4 by demand")
    wait_for(lambda: EventReason.RESUMED in event_reasons(api, ns, "emails"), what="Resumed")
    wait_for(lambda: status(api, ns, "emails").get("paused") is False, what="status unpaused")
    resumed = condition(get_scaler(api, ns, "emails"), "Paused")
    assert resumed is not None and resumed["status"] == "False"


def test_paused_true_holds_whatever_the_target_has_even_a_manual_change(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, deployment("email-worker", 0))
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url))
    enqueue(r, keys, "email", 3)
    wait_for(lambda: replicas(api, ns, "email-worker") == 3, what="scale 0 -> 3")

    annotate(api, ns, "emails", **{PAUSED_ANNOTATION: "true"})
    wait_for(lambda: status(api, ns, "emails").get("paused") is True, what="status paused")
    enqueue(r, keys, "email", 2)  # demand 5: the policy would scale up
    apps.patch_namespaced_deployment_scale("email-worker", ns, {"spec": {"replicas": 1}})
    time.sleep(SEVERAL_PASSES_S)
    assert replicas(api, ns, "email-worker") == 1  # held as it is, not 5 and not back to 3
    assert status(api, ns, "emails").get("pausedReplicas") is None

    annotate(api, ns, "emails", **{PAUSED_ANNOTATION: "false"})
    wait_for(lambda: replicas(api, ns, "email-worker") == 5, what="resumed: 1 -> 5")


def test_fallback_sets_n_while_redis_is_down_and_the_policy_returns_with_redis(
    api: client.ApiClient, kube_namespace: str, controller: KubeController
) -> None:
    ns = kube_namespace
    port = free_port()
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 0))
    url = f"redis://127.0.0.1:{port}/0"
    server = RedisServer(port=port).start()
    try:
        spec = {"fallback": {"replicas": 3, "afterFailures": 2}}
        create_scaler(api, ns, taskscaler("emails", "email-worker", url, **spec))
        wait_for(
            lambda: status(api, ns, "emails").get("reasonCode") in ("Steady", "Idle"),
            what="a first pass with Redis up",
        )
        assert replicas(api, ns, "email-worker") == 0

        server.stop()
        wait_for(lambda: replicas(api, ns, "email-worker") == 3, what="fallback to 3")
        # The status is patched right after the scale write.  A failed pass shows
        # its problem in the Reason column; the Message names the fallback taken.
        st = wait_for(
            lambda: "fallback to 3" in (s := status(api, ns, "emails")).get("reason", "") and s,
            what="status says fallback",
        )
        assert st["reasonCode"] == "RedisUnreachable"
        assert "could not be read for" in st["reason"]
        reachable = condition(get_scaler(api, ns, "emails"), "RedisReachable")
        assert reachable is not None and reachable["status"] == "False"
        time.sleep(SEVERAL_PASSES_S)
        assert replicas(api, ns, "email-worker") == 3  # held at N while Redis stays down

        server.start()  # back, empty: every type idle -> the policy says 0
        wait_for(lambda: replicas(api, ns, "email-worker") == 0, what="recovered: 3 -> 0")
        # the status patch follows the scale write: wait for it, as above
        wait_for(
            lambda: (
                (c := condition(get_scaler(api, ns, "emails"), "RedisReachable")) is not None
                and c["status"] == "True"
            ),
            what="RedisReachable back to True",
        )
    finally:
        server.stop()
