"""A real ``kubectl drain`` of the node running a busy worker waits for its
task (issue 23, item 2), on the local node with real pods.

A worker Deployment (one pod, ``taskscale worker`` of this checkout: a
one-file busybox image with the host's Python and this worktree mounted
read-only, host network so the pod reaches the test's Redis on loopback),
the PodDisruptionBudget of docs/operating.md (maxUnavailable 0 over the
workers' labels and ``taskscale.io/busy: "true"``) and the controller in this
process.  A 20 s task starts; ``kubectl drain`` of the node then cordons it,
the controller flags the pod in Redis (it claims nothing: a second task
waits, unclaimed) and keeps it marked busy, so the eviction is refused until
the task ends -- although the task is far longer than the worker's
``--grace`` (3 s), which an eviction's SIGTERM would have cut it to; then
the pod is unmarked, evicted and deleted, and the drain completes.  0
interrupted (the task completed, no failed run), 0 lost, 0 reruns (claimed
once).  How long the drain waited is printed (``-s``) and in
docs/operating.md.

Runs only with ``--with-e2e`` (``e2e/run.sh`` passes it), under
``flock /work/wt/node.lock`` when several helpers share the machine.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kubernetes import client

from e2e.cluster.localcluster import ensure_binaries
from support.counters import stat
from support.kube import controller_settings, install_crd, taskscaler
from support.kube_cluster import KubeCluster, wait_for
from support.workers import worker_argv
from taskscale.controller.kube import KubeController
from taskscale.controller.kube_client import BUSY_LABEL
from taskscale.controller.metrics import ControllerMetrics
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = [pytest.mark.kube, pytest.mark.e2e, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
TASK_S = 20.0
#: The worker's --grace, far shorter than the task: without the protection
#: an eviction's SIGTERM would cut the task (it would return through requeue).
GRACE_S = 3
LABELS = {"app": "drain-worker"}
KEYS = Keys("drain-node")


def _host_mounts() -> list[tuple[str, str]]:
    """(host path, path in the pod): what ``python -m taskscale.cli`` of this
    checkout needs -- the interpreter, its libraries, the worktree and venv."""
    python = Path(sys.base_prefix)
    mounts = [("/usr", "/usr"), ("/usr/lib", "/lib"), ("/etc", "/etc"), (str(REPO), str(REPO))]
    if Path("/usr/lib64").exists():
        mounts.append(("/usr/lib64", "/lib64"))
    if not str(python).startswith("/usr/"):
        mounts.append((str(python), str(python)))
    return mounts


def _worker(redis_url: str, image: str) -> client.V1Deployment:
    mounts = _host_mounts()
    container = client.V1Container(
        name="worker",
        image=image,
        image_pull_policy="Never",
        command=[str(REPO / ".venv/bin/python"), "-m", "taskscale.cli"],
        args=worker_argv(
            "sleep",
            "taskscale.examples",
            threads=1,
            namespace=KEYS.namespace,
            grace=GRACE_S,
        ),
        env=[
            client.V1EnvVar(name="TASKSCALE_REDIS_URL", value=redis_url),
            client.V1EnvVar(name="PYTHONDONTWRITEBYTECODE", value="1"),
            client.V1EnvVar(
                name="POD_NAME",
                value_from=client.V1EnvVarSource(
                    field_ref=client.V1ObjectFieldSelector(field_path="metadata.name")
                ),
            ),
        ],
        volume_mounts=[
            client.V1VolumeMount(name=f"host{i}", mount_path=inside, read_only=True)
            for i, (_, inside) in enumerate(mounts)
        ],
    )
    volumes = [
        client.V1Volume(name=f"host{i}", host_path=client.V1HostPathVolumeSource(path=host))
        for i, (host, _) in enumerate(mounts)
    ]
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name="drain-worker"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=LABELS),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=LABELS),
                spec=client.V1PodSpec(
                    containers=[container],
                    volumes=volumes,
                    host_network=True,
                    termination_grace_period_seconds=GRACE_S + 5,
                ),
            ),
        ),
    )


def _budget() -> client.V1PodDisruptionBudget:
    """The PodDisruptionBudget of docs/operating.md for these workers."""
    return client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="drain-worker-busy"),
        spec=client.V1PodDisruptionBudgetSpec(
            max_unavailable=0,
            selector=client.V1LabelSelector(match_labels={**LABELS, BUSY_LABEL: "true"}),
        ),
    )


@pytest.fixture
def node_api(kube_node_cluster: KubeCluster) -> Iterator[client.ApiClient]:
    with kube_node_cluster.api_client() as api:
        install_crd(api)
        yield api


def test_kubectl_drain_completes_only_after_the_busy_workers_task(
    kube_node_cluster: KubeCluster,
    node_api: client.ApiClient,
    kube_namespace: str,
    busybox_image: str,
    r: redis.Redis,
    redis_url: str,
) -> None:
    ns, core = kube_namespace, client.CoreV1Api(node_api)
    [node] = [n.metadata.name for n in core.list_node().items]
    client.PolicyV1Api(node_api).create_namespaced_pod_disruption_budget(ns, _budget())
    client.AppsV1Api(node_api).create_namespaced_deployment(ns, _worker(redis_url, busybox_image))
    scaler = taskscaler(
        "drain", "drain-worker", redis_url, minReplicas=1, maxReplicas=1,
        taskTypes=[{"name": "sleep"}], pollIntervalSeconds=0.5,
    )  # fmt: skip
    scaler["spec"]["redis"]["namespace"] = KEYS.namespace
    client.CustomObjectsApi(node_api).create_namespaced_custom_object(
        "taskscale.io", "v1alpha1", ns, "taskscalers", scaler
    )
    controller = KubeController(
        node_api, metrics=ControllerMetrics(), identity="test", settings=controller_settings(ns)
    )
    controller.start()
    try:
        try:
            wait_for(lambda: r.zcard(KEYS.workers) == 1, timeout=60, what="the worker registered")
        except AssertionError:
            pytest.fail(f"the worker pod did not register: {_diagnose(core, ns)}")
        [pod] = [p.metadata.name for p in core.list_namespaced_pod(ns).items]
        producer = Producer(r, keys=KEYS)
        producer.enqueue("sleep", TASK_S)
        wait_for(lambda: stat(r, KEYS, "sleep", "claimed") == 1, what="the task claimed")
        started = time.monotonic()
        wait_for(lambda: _label(core, ns, pod) == "true", what="the busy pod marked")

        drain_started = time.monotonic()
        drain = _kubectl(kube_node_cluster, "drain", node, "--ignore-daemonsets",
                         "--delete-emptydir-data", "--timeout=80s")  # fmt: skip
        try:
            wait_for(lambda: r.hexists(KEYS.draining, pod), what="the pod flagged")
            producer.enqueue("sleep", 0.1)  # waits: the draining worker claims nothing
            out, _ = drain.communicate(timeout=90)
        finally:
            if drain.poll() is None:
                drain.kill()
        done = time.monotonic()
        assert drain.returncode == 0, out
        left = TASK_S - (drain_started - started)
        print(
            f"\n[drain] kubectl drain took {done - drain_started:.1f} s; the task had "
            f"{left:.1f} s left when it began (the drain ended {done - started - TASK_S:.1f} s "
            "after the task)"
        )
        assert done - started >= TASK_S - 1  # the drain waited for the task
        assert stat(r, KEYS, "sleep", "completed") == 1  # 0 interrupted
        assert stat(r, KEYS, "sleep", "claimed") == 1  # 0 reruns; the second never claimed
        assert stat(r, KEYS, "sleep", "failed") == 0
        assert stat(r, KEYS, "sleep", "requeued") == 0  # never cut by a SIGTERM
        assert r.llen(KEYS.queue("sleep")) == 1  # 0 lost: it waits for a new pod
        assert not _pod_exists(core, ns, pod)
    finally:
        controller.stop()
        _kubectl(kube_node_cluster, "uncordon", node).communicate(timeout=30)


def _label(core: client.CoreV1Api, ns: str, pod: str) -> str | None:
    meta: Any = core.read_namespaced_pod(pod, ns).metadata
    return (meta.labels or {}).get(BUSY_LABEL)


def _diagnose(core: client.CoreV1Api, ns: str) -> str:
    """The worker pods' phase, container states and last log lines."""
    out = []
    for p in core.list_namespaced_pod(ns).items:
        states = [str(c.state) for c in (p.status.container_statuses or [])]
        try:
            logs = core.read_namespaced_pod_log(p.metadata.name, ns, tail_lines=20)
        except client.exceptions.ApiException as exc:
            logs = f"(no logs: {exc.reason})"
        out.append(f"{p.metadata.name} {p.status.phase} {states} logs:\n{logs}")
    return "\n".join(out) or "no pods"


def _pod_exists(core: client.CoreV1Api, ns: str, pod: str) -> bool:
    return any(p.metadata.name == pod for p in core.list_namespaced_pod(ns).items)


def _kubectl(cluster: KubeCluster, *args: str) -> subprocess.Popen[str]:
    binary = ensure_binaries().kube("kubectl")
    return subprocess.Popen(
        [str(binary), "--kubeconfig", str(cluster.kubeconfig), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
