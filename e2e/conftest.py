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
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

# e2e.support first: it puts tests/ on sys.path (for support.*).
from e2e.support import HostRedis, build_images
from support.chart import helm
from support.kube_cluster import KubeCluster
from e2e.cluster.localcluster import LocalCluster
from e2e.chartinstall import install_chart, pod_ip, wait_ready
from e2e.environment import E2E
from e2e.hostprocs import ControllerProcesses, DeploymentFollower, service_account_kubeconfig
from e2e.release import LOCAL_REDIS_CLUSTER_IP, RELEASE, TYPES, WORKER
from e2e import sessionlib
from e2e.sessionlib import host_address, load_images, say, start_local, timed

# Re-exported: scenarios and helpers import these from here.
__all__ = [
    "E2E",
    "LOCAL_REDIS_CLUSTER_IP",
    "RELEASE",
    "TYPES",
    "WORKER",
    "ControllerProcesses",
    "DeploymentFollower",
    "service_account_kubeconfig",
]

E2E_DIR = Path(__file__).resolve().parent


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if sessionlib.mode:
        terminalreporter.write_sep("-", f"e2e mode: {sessionlib.mode[0]}")
    if sessionlib.timings:
        spent = ", ".join(f"{k} {v:.1f} s" for k, v in sessionlib.timings.items())
        terminalreporter.write_line(f"e2e setup: {spent}")


@pytest.fixture(scope="session")
def e2e(request: pytest.FixtureRequest) -> Iterator[E2E]:
    with timed("images"):
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
            local, pods = start_local(request)
            cluster = KubeCluster(kubeconfig=local.kubeconfig, server=local.server, local=local)
        redis_pod = pods and local is not None
        if not redis_pod:
            redis_server = HostRedis(host="0.0.0.0" if pods else "127.0.0.1").start()
        if pods:
            with timed("image import"):
                load_images(images, local)
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
            worker_url = redis_server.url(host_address()) if pods else redis_url
            mode = (
                "pods on $KUBECONFIG's cluster, Redis on the host"
                if pods
                else "host processes (controllers, workers, Redis) on the local control plane"
            )
        sessionlib.mode[:] = [mode]
        say(request, f"mode: {mode}")
        env = E2E(cluster=cluster, namespace=namespace, redis_url=redis_url, pods=pods, mode=mode)
        with timed("chart install until ready"):
            install_chart(env, images, worker_redis_url=worker_url, redis_pod=redis_pod)
            if pods:
                wait_ready(env)
        if redis_pod:
            # This process talks to the Redis pod on the node's bridge: no
            # dependence on kube-proxy's host-wide rules for our own checks.
            env.redis_url = f"redis://{pod_ip(env, 'example-redis')}:6379/0"
        say(request, "setup: " + ", ".join(f"{k} {v:.1f} s" for k, v in sessionlib.timings.items()))
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
