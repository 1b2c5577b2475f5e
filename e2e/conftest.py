"""Fixtures of the end-to-end suite: images, a cluster, the chart, Redis, workers.

Every test under e2e/ is marked ``e2e`` and runs only with ``--with-e2e``
(``make e2e`` passes it). The session builds the images (e2e/images.sh),
brings up a cluster, installs charts/taskscale with its examples and says on
the terminal which mode it runs in:

* **pods on the local node** (the default as root): the control plane of
  e2e/cluster with a kubelet on containerd. The images are imported into its
  containerd, and everything is a real pod: 2 leader-elected controllers, the
  example worker Deployment, the scheduler and the example Redis (image
  ``example-redis``, on a fixed ClusterIP because there is no cluster DNS).
  This process reaches Redis on the Redis pod's IP over the node's bridge.
* **pods on $KUBECONFIG's cluster** (``TASKSCALE_TEST_USE_KUBECONFIG=1``; kind:
  ``TASKSCALE_E2E_KIND=<cluster name>`` loads the images with ``kind load``):
  controllers and workers in pods, Redis on the host (pods reach it through
  docker0 or ``$TASKSCALE_E2E_HOST_ADDRESS``).
* **host mode**, the fallback when no node can be started (not root, or the
  node failed; ``TASKSCALE_E2E_NODE=0`` or ``TASKSCALE_E2E_PODS=0`` force it,
  ``TASKSCALE_E2E_NODE=1`` makes a node failure an error): the controllers run
  as host processes authenticated as the chart's ServiceAccount (so the
  chart's RBAC is what they get), and a :class:`DeploymentFollower` runs
  ``taskscale worker`` processes to match the Deployment's replicas,
  SIGTERMing extra ones as a kubelet would; Redis on loopback.
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
import time
import uuid
import ipaddress
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
from kube_fixture import KubeCluster, wait_for
from e2e.cluster.localcluster import SERVICE_CIDR, LocalCluster, ensure_binaries
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
    mode: str  # said on the terminal: where controllers, workers and Redis run
    controllers: ControllerProcesses | None = None
    follower: DeploymentFollower | None = None

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def replicas(self) -> int:
        with self.cluster.api_client() as api:
            scale = client.AppsV1Api(api).read_namespaced_deployment_scale(WORKER, self.namespace)
        assert scale.spec is not None
        return int(scale.spec.replicas or 0)


# The example Redis Service's fixed ClusterIP on the local cluster (no cluster
# DNS there): in the static band of SERVICE_CIDR, which dynamic allocation avoids.
LOCAL_REDIS_CLUSTER_IP = str(ipaddress.ip_network(SERVICE_CIDR).network_address + 10)
_timings: dict[str, float] = {}
_mode: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _mode:
        terminalreporter.write_sep("-", f"e2e mode: {_mode[0]}")
    if _timings:
        spent = ", ".join(f"{k} {v:.1f} s" for k, v in _timings.items())
        terminalreporter.write_line(f"e2e setup: {spent}")


@contextlib.contextmanager
def _timed(what: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    _timings[what] = time.monotonic() - started


def _say(request: pytest.FixtureRequest, message: str) -> None:
    """Print on the terminal even without ``-s`` (the mode must be visible)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[e2e] {message}", file=sys.stderr, flush=True)


def _load_images(images: dict[str, str], local: LocalCluster | None) -> None:
    """Put the images where the cluster's kubelet finds them (no registry)."""
    docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
    kind = os.environ.get("TASKSCALE_E2E_KIND")
    node = local.node if local is not None else None
    for image in images.values():
        if kind:
            subprocess.run(["kind", "load", "docker-image", image, "--name", kind], check=True)
        elif node is not None:
            with tempfile.TemporaryDirectory() as tmp:
                archive = Path(tmp) / "image.tar"
                subprocess.run([docker, "save", "-o", str(archive), image], check=True)
                node.import_image(archive)


def _node_wanted() -> bool | None:
    """TASKSCALE_E2E_NODE: "1" a node or fail, "0" never, unset: try one as root."""
    setting = os.environ.get("TASKSCALE_E2E_NODE", "")
    if os.environ.get("TASKSCALE_E2E_PODS") == "0" or setting == "0":
        return False
    if setting == "1":
        return True
    return None if os.geteuid() == 0 else False


def _start_local(request: pytest.FixtureRequest) -> tuple[LocalCluster, bool]:
    """The local cluster, with a node when wanted and possible; (cluster, has node)."""
    wanted = _node_wanted()
    if wanted is not False:
        local = LocalCluster(binaries=ensure_binaries(with_node=True), with_node=True)
        try:
            with _timed("node cluster start"):
                local.start()
            return local, True
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            local.stop()
            if wanted:
                raise
            _say(request, f"no node could be started ({exc}); falling back to host mode")
    local = LocalCluster(binaries=ensure_binaries(with_node=False), with_node=False)
    with _timed("control plane start"):
        local.start()
    return local, False


@pytest.fixture(scope="session")
def e2e(request: pytest.FixtureRequest) -> Iterator[E2E]:
    with _timed("images"):
        images = build_images()
    existing = os.environ.get("TASKSCALE_TEST_USE_KUBECONFIG") == "1" and os.environ.get(
        "KUBECONFIG"
    )
    local: LocalCluster | None = None
    redis_server: HostRedis | None = None
    try:
        if existing:
            path = Path(str(existing).split(os.pathsep)[0])
            cluster = KubeCluster(kubeconfig=path, server="")
            # TASKSCALE_E2E_PODS=0 runs controllers and workers on the host
            # even against an existing cluster (one whose nodes can't run our images).
            pods = os.environ.get("TASKSCALE_E2E_PODS", "1") == "1"
        else:
            local, pods = _start_local(request)
            cluster = KubeCluster(kubeconfig=local.kubeconfig, server=local.server, local=local)
        redis_pod = pods and local is not None
        if not redis_pod:
            redis_server = HostRedis(host="0.0.0.0" if pods else "127.0.0.1").start()
        if pods:
            with _timed("image import"):
                _load_images(images, local)
        namespace = f"e2e-{uuid.uuid4().hex[:6]}"
        with cluster.api_client() as api:
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
            )
        if redis_pod:
            # The chart's example Redis pod; its fixed ClusterIP is reached by
            # pods and, through kube-proxy, by this process.
            redis_url = worker_url = f"redis://{LOCAL_REDIS_CLUSTER_IP}:6379/0"
            mode = "pods on the local node (controller x2, workers, scheduler, Redis)"
        else:
            assert redis_server is not None
            redis_url = redis_server.url()
            # Pods reach the host's Redis through docker0 (kind) or
            # $TASKSCALE_E2E_HOST_ADDRESS; host processes through loopback.
            worker_url = redis_server.url(_host_address()) if pods else redis_url
            mode = (
                "pods on $KUBECONFIG's cluster, Redis on the host"
                if pods
                else "host processes (controllers, workers, Redis) on the local control plane"
            )
        _mode[:] = [mode]
        _say(request, f"mode: {mode}")
        env = E2E(cluster=cluster, namespace=namespace, redis_url=redis_url, pods=pods, mode=mode)
        with _timed("chart install until ready"):
            _install_chart(env, images, worker_redis_url=worker_url, redis_pod=redis_pod)
            if pods:
                _wait_ready(env)
        if redis_pod:
            # This process talks to the Redis pod on the node's bridge: no
            # dependence on kube-proxy's host-wide rules for our own checks.
            env.redis_url = f"redis://{_pod_ip(env, 'example-redis')}:6379/0"
        _say(request, "setup: " + ", ".join(f"{k} {v:.1f} s" for k, v in _timings.items()))
        if not pods:
            env.controllers = ControllerProcesses(env, log_dir=Path(tempfile.mkdtemp()))
            env.controllers.start(2)
            env.follower = DeploymentFollower(env, redis_url)
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
        if redis_server is not None:
            redis_server.stop()


def _wait_ready(env: E2E) -> None:
    """Every Deployment but the worker (at 0) available, and Redis answering."""

    def available() -> bool:
        with env.cluster.api_client() as api:
            items = client.AppsV1Api(api).list_namespaced_deployment(env.namespace).items
        ready = {
            str(d.metadata.name): (d.status.available_replicas or 0) >= (d.spec.replicas or 0)
            for d in items
            if d.metadata and d.status and d.spec
        }
        ready.pop(WORKER, None)
        return bool(ready) and all(ready.values())

    wait_for(available, timeout=300, interval=1, what="the chart's pods ready")

    def pong() -> bool:
        try:
            return bool(env.redis().ping())
        except redis.RedisError:
            return False

    wait_for(pong, timeout=60, what=f"Redis at {env.redis_url}")


def _pod_ip(env: E2E, component: str) -> str:
    with env.cluster.api_client() as api:
        pods = client.CoreV1Api(api).list_namespaced_pod(
            env.namespace, label_selector=f"app.kubernetes.io/component={component}"
        )
    ips = [p.status.pod_ip for p in pods.items if p.status and p.status.pod_ip]
    assert len(ips) == 1, f"{component}: pod IPs {ips}"
    return str(ips[0])


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


def _redis_values(images: dict[str, str], redis_pod: bool) -> dict[str, object]:
    if not redis_pod:
        return {"enabled": False}
    repo, tag = images["example-redis"].rsplit(":", 1)
    return {
        "enabled": True,
        "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
        "clusterIP": LOCAL_REDIS_CLUSTER_IP,
    }


def _install_chart(
    env: E2E, images: dict[str, str], *, worker_redis_url: str, redis_pod: bool
) -> None:
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
            "redis": _redis_values(images, redis_pod),
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
