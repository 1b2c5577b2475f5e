"""One Redis client per URL in the controller: the scaler groups (one per key
namespace) and the decision log share it, instead of a client each."""

from __future__ import annotations

from typing import Any

import pytest
import redis

import taskscale.connection
from support.controller import MemoryActuator
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.redis_clients import RedisClients
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient
from taskscale.scaling import read_scalers


def test_a_url_has_one_client_until_its_last_user_lets_go() -> None:
    clients = RedisClients(timeout_s=0.5)
    first = clients.acquire("redis://127.0.0.1:1/0")  # nothing is sent yet
    assert clients.acquire("redis://127.0.0.1:1/0") is first
    other = clients.acquire("redis://127.0.0.1:2/0")
    assert other is not first
    kwargs = first.connection_pool.connection_kwargs  # type: ignore[union-attr]
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (0.5, 0.5)
    clients.release("redis://127.0.0.1:1/0")
    assert clients.urls() == ["redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"]
    clients.release("redis://127.0.0.1:1/0")
    clients.release("redis://127.0.0.1:2/0")
    assert clients.urls() == []
    clients.release("redis://127.0.0.1:2/0")  # once too often: ignored
    assert clients.acquire("redis://127.0.0.1:1/0") is not first  # a new one after close


def scaler(name: str, key_namespace: str) -> ScalerConfig:
    return ScalerConfig(
        name=name,
        namespace="default",
        target=f"{name}-worker",
        redis=RedisRef(url="unused", key_namespace=key_namespace),
        policy=ScalingPolicy(types=(TypePolicy("email"),), tasks_per_replica=1, max_replicas=3),
        poll_interval_s=3600.0,
    )


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URL of every client taskscale.connection.connect makes."""
    urls: list[str] = []
    build = taskscale.connection.build_client

    def counting(url: str, **options: Any) -> RedisClient:
        urls.append(url)
        return build(url, **options)

    monkeypatch.setattr(taskscale.connection, "build_client", counting)
    return urls


@pytest.mark.integration
def test_the_kube_controller_opens_one_client_per_redis_url(
    redis_url: str, made: list[str]
) -> None:
    from kubernetes import client

    from taskscale.controller.kube import KubeController

    controller = KubeController(client.ApiClient(), metrics=ControllerMetrics(), identity="t")
    try:
        for name, key_namespace in (("a", "ns-a"), ("b", "ns-b"), ("c", "ns-a")):
            obj = {"metadata": {"namespace": "default", "name": name, "uid": name}}
            controller._register(obj, scaler(name, key_namespace), redis_url)
        assert controller.reconciler.wait_listening(10)  # subscribed through it
        # two groups (ns-a, ns-b), their listeners, the decision log: one client
        assert made == [redis_url]
    finally:
        controller.reconciler.close()
        controller.decisions.close()


@pytest.mark.integration
def test_the_decision_log_and_the_reconciler_share_a_client_they_are_given(
    redis_url: str, r: redis.Redis, made: list[str]
) -> None:
    from taskscale.controller.decision_log import DecisionLog
    from taskscale.controller.reconciler import Reconciler

    clients = RedisClients()
    log = DecisionLog(clients=clients)
    reconciler = Reconciler(reporter=log, metrics=ControllerMetrics(), clients=clients)
    for name, key_namespace in (("a", "ns-a"), ("b", "ns-b")):
        config = scaler(name, key_namespace)
        log.bind(config, redis_url)
        reconciler.upsert(config, actuator=MemoryActuator(0), redis_url=redis_url)
    assert reconciler.reconcile_now("default/b").redis_error is None
    assert made == [redis_url] and clients.urls() == [redis_url]
    recorded = read_scalers(r, Keys("ns-b"))
    assert [s["scaler"] for s in recorded] == ["default/b"]  # written through it
    reconciler.remove("default/a")
    reconciler.remove("default/b")
    assert clients.urls() == [redis_url]  # the decision log still holds it
    log.close()
    assert clients.urls() == []  # the last user closed it
    reconciler.close()


def test_the_decision_log_gives_a_url_back_when_its_last_scaler_goes() -> None:
    clients = RedisClients(timeout_s=0.5)
    log = DecisionLog(None, clients=clients)
    url, other = "redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"
    log.bind(scaler("a", "ns1"), url)
    log.bind(scaler("b", "ns2"), url)
    assert clients.urls() == [url]  # one hold on the URL for both scalers
    log.forget(scaler("a", "ns1").key)
    assert clients.urls() == [url]  # b still records there
    log.bind(scaler("b", "ns2"), other)  # b moved to another Redis
    assert clients.urls() == [other]
    log.forget(scaler("b", "ns2").key)
    assert clients.urls() == []
    log.bind(scaler("c", "ns3"), url)
    log.close()
    assert clients.urls() == []
