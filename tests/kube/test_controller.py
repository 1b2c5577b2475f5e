"""The controller against a real API server (with kube-controller-manager) and
a real Redis: the CRD's validation, scaling 0 -> N -> 0 by the idle rule,
conditions and Events for a missing Deployment and an unreachable Redis,
status written only on change, and pod-deletion-cost from the registry.

No kubelet runs pods here, so they stay Pending; that is enough: the
controller scales Deployments and annotates Pods, it never talks to them.
The workers' side of Redis is written with the schema's plain commands.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.controller import enqueue, finish_tasks, register_worker, start_tasks
from support.kube import (
    as_table,
    condition,
    create_scaler,
    deployment,
    event_reasons,
    events,
    get_scaler,
    live_pods,
    replicas,
    taskscaler,
)
from support.kube_cluster import wait_for
from support.redis_server import RedisServer, free_port
from taskscale.controller.kube import (
    DELETION_COST,
    GROUP,
    PLURAL,
    VERSION,
    EventReason,
    KubeController,
)
from taskscale.keys import Keys

pytestmark = [pytest.mark.kube, pytest.mark.integration]


# --- validation by the API server ---------------------------------------------------


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (
            {"redis": {"url": "redis://r:6379", "urlSecretRef": {"name": "s", "key": "u"}}},
            "exactly one",
        ),
        ({"redis": {"namespace": "x"}}, "exactly one"),
        ({"redis": {"url": "localhost:6379"}}, "spec.redis.url"),
        ({"minReplicas": 4, "maxReplicas": 2}, "maxReplicas must be at least minReplicas"),
        ({"maxReplicas": 0}, "spec.maxReplicas"),
        ({"minReplicas": -1}, "spec.minReplicas"),
        ({"tasksPerReplica": 0}, "spec.tasksPerReplica"),
        ({"taskTypes": []}, "spec.taskTypes"),
        ({"taskTypes": [{"name": "a"}, {"name": "a"}]}, "Duplicate value"),
        ({"taskTypes": [{"name": "a:b"}]}, "spec.taskTypes[0].name"),
        ({"taskTypes": [{"name": "a", "idleThresholdSeconds": -5}]}, "idleThresholdSeconds"),
        ({"pollIntervalSeconds": 0}, "spec.pollIntervalSeconds"),
        ({"scaleTargetRef": {}}, "spec.scaleTargetRef.name"),
    ],
)
def test_api_server_rejects_an_invalid_spec(
    api: client.ApiClient, kube_namespace: str, change: dict[str, Any], complaint: str
) -> None:
    body = taskscaler("bad", "worker", "redis://127.0.0.1:6379/0", **change)
    with pytest.raises(ApiException) as caught:
        create_scaler(api, kube_namespace, body)
    assert caught.value.status == 422
    assert complaint in str(caught.value.body)


def test_api_server_accepts_a_minimal_spec_and_fills_in_the_defaults(
    api: client.ApiClient, kube_namespace: str
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TaskScaler",
        "metadata": {"name": "minimal"},
        "spec": {
            "scaleTargetRef": {"name": "worker"},
            "redis": {"urlSecretRef": {"name": "redis", "key": "url"}},
            "taskTypes": [{"name": "email"}],
        },
    }
    spec = create_scaler(api, kube_namespace, body)["spec"]
    assert spec["redis"]["namespace"] == "taskscale"
    assert spec["taskTypes"] == [{"name": "email", "idleThresholdSeconds": 300}]
    assert (spec["minReplicas"], spec["maxReplicas"], spec["tasksPerReplica"]) == (0, 10, 4)
    assert spec["pollIntervalSeconds"] == 5


def test_kubectl_get_tsc_columns_tell_target_bounds_replicas_and_reason(
    api: client.ApiClient, kube_namespace: str
) -> None:
    create_scaler(api, kube_namespace, taskscaler("cols", "email-worker", "redis://h:1/0"))
    patch = {"status": {"currentReplicas": 2, "desiredReplicas": 3, "reasonCode": "Demand"}}
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, kube_namespace, PLURAL, "cols", patch
    )
    table = as_table(api, f"/apis/{GROUP}/{VERSION}/namespaces/{kube_namespace}/tsc/cols")
    names = [c["name"] for c in table["columnDefinitions"]]
    row = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert (row["Target"], row["Min"], row["Max"]) == ("email-worker", 0, 5)
    assert (row["Current"], row["Desired"], row["Reason"]) == (2, 3, "Demand")


# --- scaling ------------------------------------------------------------------------------


def test_min_zero_scaler_scales_up_on_demand_holds_while_active_and_returns_to_zero_after_idle(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 0))
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url))
    wait_for(lambda: condition(get_scaler(api, ns, "emails"), "Ready"), what="first status")
    assert replicas(api, ns, "email-worker") == 0

    enqueue(r, keys, "email", 3)
    wait_for(lambda: replicas(api, ns, "email-worker") == 3, what="scale 0 -> 3")
    start_tasks(r, keys, "email", 3)
    finish_tasks(r, keys, "email", 2)  # one still running
    wait_for(lambda: replicas(api, ns, "email-worker") == 1, what="scale 3 -> 1 (one active)")
    time.sleep(2.0)  # well past the 0.3 s poll and the 3 s threshold's first half
    assert replicas(api, ns, "email-worker") == 1  # an active task holds its replica

    finish_tasks(r, keys, "email", 1)
    finished = time.monotonic()
    wait_for(lambda: replicas(api, ns, "email-worker") == 0, timeout=60, what="scale to 0")
    assert time.monotonic() - finished >= 3.0 - 0.5  # not before the idle threshold

    # The status is patched right after the scale write: it must follow within a pass.
    def status_shows_zero() -> bool:
        st = get_scaler(api, ns, "emails").get("status", {})
        return (st.get("currentReplicas"), st.get("desiredReplicas")) == (0, 0)

    wait_for(status_shows_zero, timeout=10, what="status shows 0 / 0")
    status = get_scaler(api, ns, "emails")["status"]
    # A pass after the scale-down may already say "Steady" (0 -> 0); the Idle
    # decision itself is the ScaledDown Event's sentence, checked below.
    assert status["reasonCode"] in ("Idle", "Steady") and status["lastScaleTime"]
    assert status["observations"][0]["type"] == "email"
    messages = [
        str(e.message) for e in events(api, ns, "emails") if e.reason == EventReason.SCALED_DOWN
    ]
    assert any(m.startswith("1 -> 0") and "idle" in m for m in messages), messages
    assert EventReason.SCALED_UP in event_reasons(api, ns, "emails")


def test_status_is_not_rewritten_while_nothing_changes(
    api: client.ApiClient, kube_namespace: str, controller: KubeController, redis_url: str
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 0))
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url))
    wait_for(lambda: condition(get_scaler(api, ns, "emails"), "Ready"), what="first status")
    version = get_scaler(api, ns, "emails")["metadata"]["resourceVersion"]
    label = {"namespace": ns, "name": "emails", "reason": "Steady"}
    before = controller.metrics.sample("taskscale_decisions_total", label) or 0.0
    wait_for(
        lambda: (controller.metrics.sample("taskscale_decisions_total", label) or 0) >= before + 5,
        what="five more passes",
    )
    assert get_scaler(api, ns, "emails")["metadata"]["resourceVersion"] == version


# --- problems: conditions, Events, and nothing changed --------------------------------------


def test_missing_deployment_sets_condition_and_event_and_recovers_when_created(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    create_scaler(api, ns, taskscaler("emails", "not-there-yet", redis_url))

    def not_found() -> dict[str, Any] | None:
        ready = condition(get_scaler(api, ns, "emails"), "Ready")
        return ready if ready and ready["reason"] == "TargetNotFound" else None

    ready = wait_for(not_found, what="Ready=False TargetNotFound")
    assert ready["status"] == "False" and "not-there-yet" in ready["message"]
    wait_for(
        lambda: EventReason.TARGET_NOT_FOUND in event_reasons(api, ns, "emails"),
        what="a TargetNotFound event",
    )
    get_errors = controller.metrics.sample(
        "taskscale_kube_api_errors_total",
        {"operation": "get_scale", "namespace": ns, "name": "emails"},
    )
    assert (get_errors or 0) >= 1

    enqueue(r, keys, "email", 2)
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("not-there-yet", 0))
    wait_for(lambda: replicas(api, ns, "not-there-yet") == 2, what="scale once it exists")
    wait_for(
        lambda: (condition(get_scaler(api, ns, "emails"), "Ready") or {}).get("status") == "True",
        what="Ready=True",
    )
    wait_for(
        lambda: EventReason.RECOVERED in event_reasons(api, ns, "emails"), what="Recovered event"
    )


def test_unreachable_redis_holds_replicas_with_condition_and_event_then_recovers(
    api: client.ApiClient, kube_namespace: str, controller: KubeController
) -> None:
    ns = kube_namespace
    port = free_port()
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 2))
    url = f"redis://127.0.0.1:{port}/0"
    create_scaler(api, ns, taskscaler("emails", "email-worker", url, minReplicas=0))

    def unreachable() -> dict[str, Any] | None:
        obj = get_scaler(api, ns, "emails")
        c = condition(obj, "RedisReachable")
        return obj if c and c["status"] == "False" else None

    obj = wait_for(unreachable, what="RedisReachable=False")
    assert condition(obj, "Ready")["reason"] == "RedisUnreachable"  # type: ignore[index]
    # The Reason column says why the pass fails, the Message what it holds.
    assert obj["status"]["reasonCode"] == "RedisUnreachable"
    assert obj["status"]["reason"].startswith("2 -> 2: Redis could not be read")
    wait_for(
        lambda: EventReason.REDIS_UNREACHABLE in event_reasons(api, ns, "emails"),
        what="a RedisUnreachable event",
    )
    errors = {"operation": "observe", "namespace": ns, "name": "emails"}
    wait_for(
        lambda: (controller.metrics.sample("taskscale_redis_errors_total", errors) or 0) >= 6,
        what="several failed passes",
    )
    assert replicas(api, ns, "email-worker") == 2  # never read missing data as idle

    with RedisServer(port=port):  # Redis comes back, empty: idle for a type never seen

        def reachable() -> bool:
            c = condition(get_scaler(api, ns, "emails"), "RedisReachable")
            return bool(c and c["status"] == "True")

        wait_for(reachable, what="RedisReachable=True")
        wait_for(lambda: replicas(api, ns, "email-worker") == 0, what="idle -> 0 after recovery")


def test_invalid_secret_reference_is_reported_and_nothing_is_scaled(
    api: client.ApiClient, kube_namespace: str, controller: KubeController
) -> None:
    ns = kube_namespace
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 1))
    body = taskscaler("emails", "email-worker", "unused")
    body["spec"]["redis"] = {"urlSecretRef": {"name": "missing", "key": "url"}}
    create_scaler(api, ns, body)

    def secret_problem() -> dict[str, Any] | None:
        ready = condition(get_scaler(api, ns, "emails"), "Ready")
        return ready if ready and ready["reason"] == EventReason.SECRET_UNAVAILABLE else None

    ready = wait_for(secret_problem, what="Ready=False RedisSecretUnavailable")
    assert "does not exist" in ready["message"]
    assert replicas(api, ns, "email-worker") == 1


def test_redis_url_is_read_from_the_named_secret(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    client.CoreV1Api(api).create_namespaced_secret(
        ns,
        client.V1Secret(metadata=client.V1ObjectMeta(name="redis"), string_data={"url": redis_url}),
    )
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 0))
    body = taskscaler("emails", "email-worker", "unused")
    body["spec"]["redis"] = {"urlSecretRef": {"name": "redis", "key": "url"}}
    create_scaler(api, ns, body)
    enqueue(r, keys, "email", 2)
    wait_for(lambda: replicas(api, ns, "email-worker") == 2, what="scale from the secret's Redis")


# --- pod-deletion-cost ----------------------------------------------------------------------


def test_pod_deletion_cost_follows_the_registry_so_the_busy_pod_survives_scale_down(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    ns = kube_namespace
    core = client.CoreV1Api(api)
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 3))

    def three_pods() -> list[str] | None:
        live = sorted(live_pods(core, ns, "deployment=email-worker"))
        return live if len(live) == 3 else None

    busy_pod, idle_pod, _ = wait_for(three_pods, what="three pods")
    register_worker(r, keys, worker_id="w-busy", pod=busy_pod, types="email", busy=1)
    register_worker(r, keys, worker_id="w-idle", pod=idle_pod, types="email", busy=0)
    enqueue(r, keys, "email", 1)
    start_tasks(r, keys, "email", 1)  # one task runs, on busy_pod
    create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url))

    wait_for(lambda: replicas(api, ns, "email-worker") == 1, what="scale 3 -> 1")
    # Unscheduled pods are deleted at once, so only the survivor can be read.
    survivor: Any = core.read_namespaced_pod(busy_pod, ns)
    assert (survivor.metadata.annotations or {}).get(DELETION_COST) == "1"

    def survivors() -> list[str] | None:
        live = live_pods(core, ns, "deployment=email-worker")
        return live if len(live) == 1 else None

    assert wait_for(survivors, what="the ReplicaSet to remove two pods") == [busy_pod]
