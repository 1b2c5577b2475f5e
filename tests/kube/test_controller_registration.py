"""Registering TaskScalers on a real API server: a scaler whose types are
spread over several key namespaces, the decisions every scaler records in
Redis for the dashboard, a malformed Redis URL (in the spec or in a Secret)
reported with its password masked, and one TaskScaler the controller fails
on that must not stop the others, nor the controller's readiness.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import enqueue
from support.kube import (
    condition,
    controller_settings,
    create_scaler,
    deployment,
    events,
    get_scaler,
    replicas,
    taskscaler,
)
from support.kube_cluster import wait_for
from taskscale.controller import kube
from taskscale.controller.kube import EventReason, KubeController
from taskscale.controller.metrics import ControllerMetrics
from taskscale.keys import Keys
from taskscale.scaling import read_scalers
from taskscale.shards import ShardMap

pytestmark = [pytest.mark.kube, pytest.mark.integration]

SHARDS = ShardMap(("shard-a", "shard-b", "shard-c"))
PASSWORD = "s3cret-Pw"


def type_in(namespace: str) -> str:
    """A task type that lives in ``namespace`` of :data:`SHARDS`."""
    return next(t for t in (f"job{i}" for i in range(200)) if SHARDS.namespace_for(t) == namespace)


def ready(api: client.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
    return condition(get_scaler(api, ns, name), "Ready")


def problem_reported(
    api: client.ApiClient, ns: str, name: str, reason: str
) -> tuple[dict[str, Any], list[str]] | None:
    """The Ready=False condition with ``reason`` and the Warning Events' messages."""
    found = ready(api, ns, name)
    if not found or found["status"] != "False" or found["reason"] != reason:
        return None
    warnings = [str(e.message) for e in events(api, ns, name) if e.reason == reason]
    return (found, warnings) if warnings else None


# --- decisions in Redis ----------------------------------------------------------------------


def test_a_scalers_passes_reach_its_decision_log_in_redis(
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
    enqueue(r, keys, "email", 2)
    wait_for(lambda: replicas(api, ns, "email-worker") == 2, what="scale 0 -> 2")

    def recorded() -> dict[str, Any] | None:
        found = [s for s in read_scalers(r, keys) if s["scaler"] == f"{ns}/emails"]
        return found[0] if found and any(d["scaled"] for d in found[0]["decisions"]) else None

    scaler = wait_for(recorded, timeout=20, what="the scale decision in Redis")
    assert (scaler["target"], scaler["types"]) == ("email-worker", ["email"])
    scaled = next(d for d in scaler["decisions"] if d["scaled"])
    assert (scaled["current"], scaled["desired"]) == (0, 2)
    assert scaled["reason"].startswith("0 -> 2")


def test_a_scaler_spread_over_namespaces_scales_from_two_and_records_in_the_first(
    api: client.ApiClient,
    kube_namespace: str,
    controller: KubeController,
    r: redis.Redis,
    redis_url: str,
) -> None:
    ns = kube_namespace
    in_a, in_b, in_c = (type_in(shard) for shard in SHARDS.namespaces)
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("spread-worker", 0))
    body = taskscaler(
        "spread",
        "spread-worker",
        redis_url,
        taskTypes=[{"name": t, "idleThresholdSeconds": 3} for t in (in_a, in_b, in_c)],
    )
    body["spec"]["redis"]["namespace"] = ",".join(SHARDS.namespaces)
    create_scaler(api, ns, body)
    wait_for(lambda: (ready(api, ns, "spread") or {}).get("status") == "True", what="Ready=True")

    enqueue(r, Keys("shard-b"), in_b, 2)
    enqueue(r, Keys("shard-c"), in_c, 1)
    wait_for(lambda: replicas(api, ns, "spread-worker") == 3, what="scale 0 -> 3 over two shards")

    def recorded() -> dict[str, Any] | None:
        found = [s for s in read_scalers(r, Keys("shard-a")) if s["scaler"] == f"{ns}/spread"]
        return found[0] if found and found[0]["desired"] == 3 else None

    scaler = wait_for(recorded, timeout=20, what="the sharded scaler's decisions in shard-a")
    assert any(d["scaled"] and d["desired"] == 3 for d in scaler["decisions"])
    assert read_scalers(r, Keys("shard-b")) == [] and read_scalers(r, Keys("shard-c")) == []


# --- problems, reported on the object, passwords masked ----------------------------------


@pytest.mark.parametrize("where", ["spec", "secret"])
def test_a_malformed_url_is_reported_with_its_password_masked(
    api: client.ApiClient, kube_namespace: str, controller: KubeController, where: str
) -> None:
    ns = kube_namespace
    url = f"redis+sentinel://app:{PASSWORD}@10.0.0.5/orders"  # the CRD's pattern lets it in
    client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 1))
    body = taskscaler("emails", "email-worker", url)
    if where == "secret":
        secret = client.V1Secret(metadata=client.V1ObjectMeta(name="redis"), string_data={"u": url})
        client.CoreV1Api(api).create_namespaced_secret(ns, secret)
        body["spec"]["redis"] = {"urlSecretRef": {"name": "redis", "key": "u"}}
    create_scaler(api, ns, body)

    reason = EventReason.INVALID_SPEC if where == "spec" else EventReason.SECRET_UNAVAILABLE
    found, warnings = wait_for(
        lambda: problem_reported(api, ns, "emails", reason), what=f"Ready=False {reason}"
    )
    status = get_scaler(api, ns, "emails")["status"]
    for text in (found["message"], status["reason"], *warnings):
        assert "'10.0.0.5' is not host:port" in text and "app:***@10.0.0.5" in text, text
        assert PASSWORD not in text, text
    if where == "secret":
        assert found["message"].startswith("secret 'redis' key 'u': invalid Redis URL")
    assert replicas(api, ns, "email-worker") == 1


# --- one broken TaskScaler next to good ones ----------------------------------------------


@pytest.fixture
def fresh_controller(
    api: client.ApiClient, kube_namespace: str
) -> Iterator[tuple[KubeController, threading.Event]]:
    """A controller not started yet (the test creates objects first); the event
    is its readiness: set once the first list of TaskScalers went through."""
    synced = threading.Event()
    ctl = KubeController(
        api,
        metrics=ControllerMetrics(),
        identity="test",
        settings=controller_settings(kube_namespace),
        on_synced=synced.set,
    )
    yield ctl, synced
    ctl.stop()


def test_a_taskscaler_the_controller_fails_on_does_not_stop_the_others(
    api: client.ApiClient,
    kube_namespace: str,
    fresh_controller: tuple[KubeController, threading.Event],
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = kube_namespace
    ctl, synced = fresh_controller
    secret_url = redis_url.replace("redis://", f"redis://app:{PASSWORD}@", 1)
    real = kube.make_actuator

    def failing_for_one(config: Any, **kwargs: Any) -> Any:  # a bug that hits one object
        if config.name == "a-broken":
            raise RuntimeError(f"unexpected trouble with {config.redis.url}\nsecond line")
        return real(config, **kwargs)

    monkeypatch.setattr(kube, "make_actuator", failing_for_one)
    for name in ("a-broken-worker", "b-good-worker"):
        client.AppsV1Api(api).create_namespaced_deployment(ns, deployment(name, 0))
    # listed in name order: the broken one comes first
    create_scaler(api, ns, taskscaler("a-broken", "a-broken-worker", secret_url))
    create_scaler(api, ns, taskscaler("b-good", "b-good-worker", redis_url))
    ctl.start()

    assert synced.wait(30), "the first list never completed (readiness never set)"
    enqueue(r, keys, "email", 2)
    wait_for(lambda: replicas(api, ns, "b-good-worker") == 2, what="the good one scales")
    found, warnings = wait_for(
        lambda: problem_reported(api, ns, "a-broken", EventReason.REGISTRATION_FAILED),
        what="Ready=False RegistrationFailed on the broken one",
    )
    for text in (found["message"], *warnings):
        assert text.startswith("the controller could not register it: RuntimeError: unexpected")
        assert "\n" not in text and "second line" not in text, text
        assert PASSWORD not in text and "app:***@" in text, text
    assert replicas(api, ns, "a-broken-worker") == 0
    assert ctl.reconciler.keys() == [f"{ns}/b-good"]

    # A change to the broken one is handled again: fixed, it is registered.
    monkeypatch.setattr(kube, "make_actuator", real)
    fixed = {"spec": {"redis": {"url": redis_url}}}
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        kube.GROUP, kube.VERSION, ns, kube.PLURAL, "a-broken", fixed
    )
    wait_for(lambda: replicas(api, ns, "a-broken-worker") == 2, what="the fixed one scales")
