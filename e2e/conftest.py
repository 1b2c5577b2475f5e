"""Fixtures of the end-to-end suite: images, a cluster, the chart, Redis, workers.

Every test under e2e/ is marked ``e2e`` and runs only with ``--with-e2e``
(``make e2e`` passes it). The session builds the images (e2e/images.sh),
brings up a cluster and installs charts/taskscale with its example worker:

* ``KUBECONFIG`` + ``TASKSCALE_TEST_USE_KUBECONFIG=1``: that cluster (kind:
  set ``TASKSCALE_E2E_KIND=<cluster name>`` so images are loaded with
  ``kind load``); the controller runs in pods.
* otherwise the local control plane of e2e/cluster.
  ``TASKSCALE_E2E_PODS=0`` forces the host mode below on any cluster. With a kubelet
  (``TASKSCALE_E2E_NODE=1``) the images are imported into its containerd and
  worker pods run. Without one (the default where the kubelet can't run), the
  controller runs as host processes authenticated as the chart's
  ServiceAccount (so the chart's RBAC is what they get), and a
  :class:`DeploymentFollower` runs ``taskscale worker`` processes to match the
  Deployment's replicas, SIGTERMing extra ones as a kubelet would.

Redis is a real redis-server on the host in both local modes.
"""

# ruff: noqa: I001  (import order matters: see below)
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from typing import IO
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import yaml
from kubernetes import client

# e2e.support first: it puts tests/ and tests/chart/ on sys.path.
from e2e.support import HostRedis, build_images, free_port
from chartlib import CHART, adopt_crd_if_present, helm, service_account_token
from kube_fixture import KubeCluster
from e2e.cluster.localcluster import LocalCluster, ensure_binaries
from taskscale.controller.local import LocalPool, LocalPoolSettings

E2E_DIR = Path(__file__).resolve().parent
RELEASE = "tse2e"
WORKER = f"{RELEASE}-taskscale-example-worker"
TYPES = ("sleep", "noop")


def pytest_addoption(parser: pytest.Parser) -> None:
    # tests/conftest.py defines it too; both are loaded by `pytest tests e2e`.
    with contextlib.suppress(ValueError):
        parser.addoption("--with-e2e", action="store_true", help="run the end-to-end suite")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="end-to-end: pass --with-e2e (make e2e)")
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            if not config.getoption("--with-e2e"):
                item.add_marker(skip)


# --- the environment --------------------------------------------------------------


@dataclass
class E2E:
    """What the scenarios act on."""

    cluster: KubeCluster
    namespace: str
    redis_url: str  # as the test process reaches it
    pods: bool  # workers and the controller run as real pods
    controllers: ControllerProcesses | None = None
    follower: DeploymentFollower | None = None

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def replicas(self) -> int:
        with self.cluster.api_client() as api:
            scale = client.AppsV1Api(api).read_namespaced_deployment_scale(WORKER, self.namespace)
        assert scale.spec is not None
        return int(scale.spec.replicas or 0)


def _load_images(images: dict[str, str], local: LocalCluster | None) -> None:
    docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
    kind = os.environ.get("TASKSCALE_E2E_KIND")
    for image in images.values():
        if kind:
            subprocess.run(["kind", "load", "docker-image", image, "--name", kind], check=True)
        elif local is not None and local._node is not None:
            with tempfile.TemporaryDirectory() as tmp:
                archive = Path(tmp) / "image.tar"
                subprocess.run([docker, "save", "-o", str(archive), image], check=True)
                local._node.import_image(archive)


@pytest.fixture(scope="session")
def e2e(request: pytest.FixtureRequest) -> Iterator[E2E]:
    images = build_images()
    existing = os.environ.get("TASKSCALE_TEST_USE_KUBECONFIG") == "1" and os.environ.get(
        "KUBECONFIG"
    )
    with_node = os.environ.get("TASKSCALE_E2E_NODE") == "1"
    local: LocalCluster | None = None
    # TASKSCALE_E2E_PODS=0 runs controllers and workers on the host even
    # against an existing cluster (one whose nodes can't run our images).
    pods = os.environ.get("TASKSCALE_E2E_PODS", "1" if existing or with_node else "0") == "1"
    redis_server = HostRedis(host="0.0.0.0" if pods else "127.0.0.1").start()
    try:
        if existing:
            path = Path(str(existing).split(os.pathsep)[0])
            cluster = KubeCluster(kubeconfig=path, server="")
        else:
            local = LocalCluster(binaries=ensure_binaries(with_node=with_node), with_node=with_node)
            local.start()
            cluster = KubeCluster(kubeconfig=local.kubeconfig, server=local.server, local=local)
        _load_images(images, local)
        namespace = f"e2e-{uuid.uuid4().hex[:6]}"
        with cluster.api_client() as api:
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
            )
        node_ip = getattr(getattr(local, "_node", None), "node_ip", None) or _host_address()
        env = E2E(
            cluster=cluster,
            namespace=namespace,
            redis_url=redis_server.url(),
            pods=pods,
        )
        # Pods reach the host's Redis through the node (or docker0) address;
        # host-mode workers and controllers through loopback.
        worker_url = redis_server.url(node_ip) if pods else redis_server.url()
        _install_chart(env, images, worker_redis_url=worker_url)
        if not pods:
            env.controllers = ControllerProcesses(env, log_dir=Path(tempfile.mkdtemp()))
            env.controllers.start(2)
            env.follower = DeploymentFollower(env, redis_server.url())
            env.follower.start()
        yield env
    finally:
        if "env" in locals():
            if env.follower is not None:
                env.follower.stop()
            if env.controllers is not None:
                env.controllers.stop_all()
            if local is None:  # an existing cluster: leave it as we found it
                helm(
                    "uninstall",
                    RELEASE,
                    "--namespace",
                    env.namespace,
                    check=False,
                    env={"KUBECONFIG": str(env.cluster.kubeconfig)},
                )
                with env.cluster.api_client() as api:
                    client.CoreV1Api(api).delete_namespace(env.namespace)
        if local is not None:
            local.stop()
        redis_server.stop()


def _host_address() -> str:
    """Where pods reach this host: $TASKSCALE_E2E_HOST_ADDRESS, else docker0's
    address (kind nodes are containers on that bridge), else loopback."""
    configured = os.environ.get("TASKSCALE_E2E_HOST_ADDRESS")
    if configured:
        return configured
    result = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True, check=False
    )
    fields = result.stdout.split()
    if "inet" in fields:
        return fields[fields.index("inet") + 1].split("/")[0]
    return "127.0.0.1"


def _install_chart(env: E2E, images: dict[str, str], *, worker_redis_url: str) -> None:
    def repo_tag(image: str) -> tuple[str, str]:
        repo, tag = image.rsplit(":", 1)
        return repo, tag

    ctl_repo, ctl_tag = repo_tag(images["controller"])
    wrk_repo, wrk_tag = repo_tag(images["worker"])
    values = {
        "image": {"repository": ctl_repo, "tag": ctl_tag, "pullPolicy": "Never"},
        "controller": {
            # Without a kubelet, the controllers run on the host (see module doc).
            "replicas": 2 if env.pods else 0,
            "leaderElection": {"enabled": True},
            "logLevel": "debug",
        },
        "examples": {
            "enabled": True,
            "redis": {"enabled": False},
            "redisUrl": worker_redis_url,
            "worker": {
                "image": {"repository": wrk_repo, "tag": wrk_tag, "pullPolicy": "Never"},
                "types": list(TYPES),
                "threads": 4,
                "graceSeconds": 20,
            },
            "scheduler": {"enabled": env.pods},
            "taskScaler": {
                "tasksPerReplica": 4,
                "minReplicas": 0,
                "maxReplicas": 10,
                "idleThresholdSeconds": 10,
                "scaleDownStabilizationSeconds": 5,
                "pollIntervalSeconds": 1,
            },
        },
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values, f)
    with env.cluster.api_client() as api:
        adopt_crd_if_present(api, RELEASE, env.namespace)
    helm(
        "install",
        RELEASE,
        CHART,
        "--namespace",
        env.namespace,
        "-f",
        f.name,
        env={"KUBECONFIG": str(env.cluster.kubeconfig)},
    )


# --- controllers and workers on the host (no kubelet) ------------------------------


def service_account_kubeconfig(env: E2E, path: Path) -> Path:
    """A kubeconfig that authenticates as the chart's controller ServiceAccount."""
    admin = yaml.safe_load(env.cluster.kubeconfig.read_text())
    with env.cluster.api_client() as api:
        token = service_account_token(api, f"{RELEASE}-taskscale", env.namespace, seconds=7200)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "taskscale-controller", "user": {"token": token}}],
        "contexts": [
            {
                "name": "sa",
                "context": {
                    "cluster": admin["clusters"][0]["name"],
                    "user": "taskscale-controller",
                    "namespace": env.namespace,
                },
            }
        ],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    return path


class ControllerProcesses:
    """``taskscale controller`` replicas on the host, leader-elected, as the chart's SA."""

    def __init__(self, env: E2E, *, log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.kubeconfig = service_account_kubeconfig(env, log_dir / "sa.kubeconfig")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}
        self._serial = 0

    def start(self, count: int) -> None:
        for _ in range(count):
            self._serial += 1
            name = f"controller-{self._serial}"
            port = free_port()
            with (self.log_dir / f"{name}.log").open("wb") as log:
                self.processes[name] = self._spawn(name, port, log)
            self.ports[name] = port

    def _spawn(self, name: str, port: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                str(Path(sys.executable).with_name("taskscale")),
                "controller",
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect",
                f"--leader-election-namespace={self.env.namespace}",
                f"--metrics-port={port}",
                "--metrics-host=127.0.0.1",
                "--log-level=info",
            ],
            env={**os.environ, "POD_NAME": name, "POD_NAMESPACE": self.env.namespace},
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> list[str]:
        return [n for n, p in self.processes.items() if p.poll() is None]

    def kill(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGKILL)
        self.processes[name].wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


class DeploymentFollower:
    """A kubelet stand-in: keeps ``taskscale worker`` processes at the Deployment's
    replicas (LocalPool: extra ones get SIGTERM and drain)."""

    def __init__(self, env: E2E, redis_url: str) -> None:
        self.env = env
        self.pool = LocalPool(
            LocalPoolSettings(
                types=TYPES,
                redis_url=redis_url,
                threads=4,
                imports=("taskscale.examples",),
                name_prefix=f"{WORKER}-pod",
                extra_args=("--grace", "20"),
                log_dir=Path(tempfile.mkdtemp(prefix="ts-e2e-workers-")),
            )
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deployment-follower", daemon=True)
        self.max_seen = 0

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wanted = self.env.replicas()
                self.max_seen = max(self.max_seen, wanted)
                self.pool.scale(wanted, busy_by_pod={})
            except Exception as exc:  # keep following; the test asserts outcomes
                print(f"deployment follower: {exc}", file=sys.stderr)
            self._stop.wait(0.25)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.pool.stop_all()
