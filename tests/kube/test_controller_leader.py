"""Lease leader election on a real API server: one holder at a time, a
released Lease is taken at once, an abandoned one only after its duration;
and two real ``taskscale controller --leader-elect`` processes, of which only
the leader scales, with the standby taking over when the leader is stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kubernetes import client

from support.controller import enqueue
from support.kube import create_scaler, deployment, install_crd, replicas, taskscaler
from support.kube_cluster import KubeCluster, wait_for
from support.redis_server import free_port
from taskscale.controller.leader import LeaderElector, LeaseSettings
from taskscale.keys import Keys

pytestmark = pytest.mark.kube

FAST = LeaseSettings(lease_duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.5)
TASKSCALE = Path(sys.executable).with_name("taskscale")


@pytest.fixture
def coordination(kube_cluster: KubeCluster) -> Iterator[client.CoordinationV1Api]:
    with kube_cluster.api_client() as api:
        yield client.CoordinationV1Api(api)


def elector(coordination: client.CoordinationV1Api, namespace: str, who: str) -> LeaderElector:
    return LeaderElector(
        coordination, namespace=namespace, name="election", identity=who, settings=FAST
    )


def holder(coordination: client.CoordinationV1Api, namespace: str, name: str) -> str | None:
    lease: Any = coordination.read_namespaced_lease(name, namespace)
    return lease.spec.holder_identity if lease.spec else None


def test_only_one_candidate_holds_the_lease(
    coordination: client.CoordinationV1Api, kube_namespace: str
) -> None:
    a, b = elector(coordination, kube_namespace, "a"), elector(coordination, kube_namespace, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.try_acquire_or_renew()  # a renews
    assert not b.try_acquire_or_renew()
    assert holder(coordination, kube_namespace, "election") == "a"


def test_released_lease_is_taken_by_the_standby_at_once(
    coordination: client.CoordinationV1Api, kube_namespace: str
) -> None:
    a, b = elector(coordination, kube_namespace, "a"), elector(coordination, kube_namespace, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert b.try_acquire_or_renew()
    assert holder(coordination, kube_namespace, "election") == "b"
    assert not a.try_acquire_or_renew()


def test_abandoned_lease_is_taken_only_after_the_lease_duration(
    coordination: client.CoordinationV1Api, kube_namespace: str
) -> None:
    a, b = elector(coordination, kube_namespace, "a"), elector(coordination, kube_namespace, "b")
    assert a.try_acquire_or_renew()  # ... and then a goes silent without releasing
    first_seen = time.monotonic()
    assert not b.try_acquire_or_renew()
    deadline = first_seen + 30
    while not b.try_acquire_or_renew():
        assert time.monotonic() < deadline, "b never took the abandoned lease"
        time.sleep(0.2)
    assert time.monotonic() - first_seen >= FAST.lease_duration_s
    assert holder(coordination, kube_namespace, "election") == "b"


def test_campaign_calls_back_on_gaining_the_lease_and_releases_on_stop(
    coordination: client.CoordinationV1Api, kube_namespace: str
) -> None:
    a = elector(coordination, kube_namespace, "a")
    stop = threading.Event()
    log: list[str] = []
    thread = threading.Thread(
        target=a.run,
        args=(stop,),
        kwargs={
            "on_started_leading": lambda: log.append("started"),
            "on_stopped_leading": lambda: log.append("stopped"),
        },
    )
    thread.start()
    try:
        assert a.wait_leader(30)
    finally:
        stop.set()
        thread.join(30)
    assert log == ["started", "stopped"]
    assert holder(coordination, kube_namespace, "election") is None


# --- two controller processes -----------------------------------------------------------


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def metric(port: int, line_prefix: str) -> float | None:
    _, body = scrape(port)
    for line in body.splitlines():
        if line.startswith(line_prefix):
            return float(line.rsplit(" ", 1)[1])
    return None


def start_controller(
    kubeconfig: Path, namespace: str, identity: str, port: int, log: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "POD_NAME": identity}
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                str(TASKSCALE),
                "controller",
                "--kubeconfig",
                str(kubeconfig),
                "--watch-namespace",
                namespace,
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(port),
                "--leader-elect",
                "--leader-election-namespace",
                namespace,
                "--log-level",
                "debug",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.slow
@pytest.mark.integration
def test_two_controllers_only_the_leader_scales_and_the_standby_takes_over_on_sigterm(
    kube_cluster: KubeCluster,
    kube_namespace: str,
    r: redis.Redis,
    redis_url: str,
    tmp_path: Path,
) -> None:
    ns, keys = kube_namespace, Keys("taskscale")
    with kube_cluster.api_client() as api:
        install_crd(api)
        coordination = client.CoordinationV1Api(api)
        client.AppsV1Api(api).create_namespaced_deployment(ns, deployment("email-worker", 0))
        create_scaler(api, ns, taskscaler("emails", "email-worker", redis_url))
        port_a, port_b = free_port(), free_port()
        a = start_controller(kube_cluster.kubeconfig, ns, "ctl-a", port_a, tmp_path / "a.log")
        b: subprocess.Popen[bytes] | None = None
        try:
            wait_for(lambda: _holder_or_none(coordination, ns) == "ctl-a", what="a leads")
            b = start_controller(kube_cluster.kubeconfig, ns, "ctl-b", port_b, tmp_path / "b.log")
            wait_for(lambda: scrape(port_b, "/readyz")[0] == 200, what="standby ready")
            assert metric(port_b, "taskscale_leader ") == 0.0
            assert metric(port_a, "taskscale_leader ") == 1.0

            enqueue(r, keys, "email", 2)
            wait_for(lambda: replicas(api, ns, "email-worker") == 2, what="leader scales to 2")
            assert metric(port_a, "taskscale_decisions_total{") is not None
            assert metric(port_b, "taskscale_decisions_total{") is None  # the standby never acted

            a.send_signal(signal.SIGTERM)
            assert a.wait(30) == 0
            # a released the Lease before exiting: b need not wait out its 15 s.
            assert _holder_or_none(coordination, ns) in (None, "ctl-b")
            wait_for(lambda: _holder_or_none(coordination, ns) == "ctl-b", what="b takes over")
            enqueue(r, keys, "email", 2)
            wait_for(lambda: replicas(api, ns, "email-worker") == 4, what="new leader scales")
            assert metric(port_b, "taskscale_leader ") == 1.0
            assert metric(port_b, "taskscale_decisions_total{") is not None
        finally:
            for process in (a, b):
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(30)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(10)
        assert b is not None and b.returncode == 0, (tmp_path / "b.log").read_text()[-3000:]


def _holder_or_none(coordination: client.CoordinationV1Api, namespace: str) -> str | None:
    try:
        return holder(coordination, namespace, "taskscale-controller")
    except client.exceptions.ApiException:
        return None
