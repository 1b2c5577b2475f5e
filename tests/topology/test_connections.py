"""A worker, a scheduler, the controller's observer, its reconciler (with the
demand listener) and ``taskscale status`` reach Redis through Sentinel, over
TLS and on a Redis Cluster, by URL alone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
import redis

from support.controller import MemoryActuator
from support.topologies import TlsServer
from support.waiting import wait_until
from support.workers import running_scheduler, running_worker
from taskscale.connection import connect
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.observer import DemandListener, Observer, ObserveRequest
from taskscale.controller.reconciler import PassOutcome, Reconciler, ReconcilerSettings
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.redis_urls import build_client

pytestmark = [pytest.mark.integration, pytest.mark.topology]


def completed(client: redis.Redis, keys: Keys, task_type: str) -> int:
    return int(client.hget(keys.stats(task_type), "completed") or 0)


def run_some_tasks(url: str, keys: Keys) -> redis.Redis:
    """Enqueue 5 ready and 2 delayed echo tasks through ``url``; a worker and a
    scheduler on the same URL complete all 7."""
    client = connect(url)
    producer = Producer(client, keys=keys)
    producer.enqueue_many("echo", [((i,), {}) for i in range(5)])  # type: ignore[misc]
    for i in range(2):
        producer.enqueue("echo", i, delay=0.3)
    with (
        running_worker(url, ("echo",), keys=keys, client=connect(url)),
        running_scheduler(url, keys=keys, lease_s=3.0),
    ):
        wait_until(lambda: completed(client, keys, "echo") == 7, timeout=30)
    return client  # type: ignore[return-value]


def test_worker_and_scheduler_run_tasks_through_sentinel(redis_sentinel: object) -> None:
    keys = Keys("sentinel-basic")
    url: str = redis_sentinel.url  # type: ignore[attr-defined]
    client = run_some_tasks(url, keys)
    assert client.connection_pool.service_name == "taskscale"  # type: ignore[attr-defined]
    assert int(client.hget(keys.active, "echo") or 0) == 0


def test_worker_and_observer_connect_over_tls_with_a_ca_file(tls_redis: TlsServer) -> None:
    keys = Keys("tls-basic")
    assert tls_redis.url.startswith("rediss://") and "ssl_ca_certs=" in tls_redis.url
    run_some_tasks(tls_redis.url, keys)
    # the controller builds its observer's client from the URL the same way
    observer = Observer(build_client(tls_redis.url, socket_timeout=5), keys)
    seen = observer.observe({"s": ObserveRequest(types=("echo",), lead_s=0)})["s"]
    assert seen.types["echo"].completed_total == 7
    assert seen.types["echo"].queued == 0 and seen.types["echo"].active == 0


def test_reconciler_scales_on_demand_over_tls_with_a_ca_file(tls_redis: TlsServer) -> None:
    """The controller's reconcile loop on rediss:// + a CA file: its observer
    reads the queue and its demand listener wakes it (the poll is an hour)."""
    keys = Keys("tls-reconcile")
    url = tls_redis.url
    policy = ScalingPolicy(
        types=(TypePolicy("email", idle_threshold_s=60),),
        tasks_per_replica=1,
        min_replicas=0,
        max_replicas=10,
    )
    config = ScalerConfig(
        name="emails",
        namespace="default",
        target="email-worker",
        redis=RedisRef(url=url, key_namespace=keys.namespace),
        policy=policy,
        poll_interval_s=3600.0,  # only a demand signal can bring a second pass
    )
    outcomes: list[PassOutcome] = []

    class Kept:
        def report(self, outcome: PassOutcome) -> None:
            outcomes.append(outcome)

    actuator = MemoryActuator(replicas=0)
    reconciler = Reconciler(
        reporter=Kept(), metrics=ControllerMetrics(), settings=ReconcilerSettings()
    )
    reconciler.upsert(config, actuator=actuator, redis_url=url)
    loop = threading.Thread(target=reconciler.run, daemon=True)
    loop.start()
    client = connect(url)
    try:
        assert reconciler.wait_listening(10), "the demand listener did not subscribe over TLS"
        wait_until(lambda: len(outcomes) == 1, timeout=20)  # the first pass: 0 -> 0
        assert outcomes[0].ok and actuator.replicas == 0
        producer = Producer(client, keys=keys)
        producer.enqueue_many("email", [((i,), {}) for i in range(3)])  # type: ignore[misc]
        wait_until(lambda: actuator.replicas == 3, timeout=30)
    finally:
        reconciler.close()
        loop.join(10)
        client.delete(*keys.queues("email"))
        client.close()
    assert all(o.ok for o in outcomes), [o.message for o in outcomes]  # no error retries
    seen = outcomes[-1].observation
    assert seen is not None and seen.types["email"].queued == 3


def test_tls_client_certificate_from_url_parameters() -> None:
    with TlsServer(require_client_cert=True) as server:
        with pytest.raises(redis.ConnectionError):
            connect(server.url).ping()  # the CA alone is not enough here
        client = connect(server.client_cert_url())
        assert client.ping()
        client.close()


def test_observer_status_and_demand_listener_on_a_cluster(redis_cluster: object) -> None:
    url: str = redis_cluster.url  # type: ignore[attr-defined]
    keys = Keys("cluster-basic")
    client = connect(url)
    client.delete(keys.types, keys.active)
    heard: list[str] = []
    listener = DemandListener(client, keys, heard.append)  # type: ignore[arg-type]
    listener.start()
    try:
        assert listener.wait_subscribed(10)
        Producer(client, keys=keys).enqueue("echo", 1)
        wait_until(lambda: heard == ["echo"], timeout=10)
    finally:
        listener.stop()
    seen = Observer(client, keys).observe({"s": ObserveRequest(types=("echo",), lead_s=0)})["s"]
    assert seen.types["echo"].queued == 1
    out = subprocess.run(
        [sys.executable, "-m", "taskscale.cli", "status", "--json", "--namespace", keys.namespace],
        env={"TASKSCALE_REDIS_URL": url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout)["types"]["echo"]["queued"] == 1


def test_one_demand_listener_hears_every_namespace_of_a_sharded_deployment(
    redis_cluster: object,
) -> None:
    client = connect(redis_cluster.url)  # type: ignore[attr-defined]
    spread = [Keys("listen-a"), Keys("listen-b"), Keys("listen-c")]
    heard: list[str] = []
    listener = DemandListener(client, spread, heard.append)  # type: ignore[arg-type]
    listener.start()
    try:
        assert listener.wait_subscribed(10)  # only once all three are confirmed
        for keys, task_type in zip(spread, ("ta", "tb", "tc"), strict=True):
            client.delete(*keys.queues(task_type))
            Producer(client, keys=keys).enqueue(task_type)
        wait_until(lambda: sorted(heard) == ["ta", "tb", "tc"], timeout=10)
    finally:
        listener.stop()
