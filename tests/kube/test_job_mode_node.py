"""Job mode with real pods on the local node: a burst of N tasks becomes N
Jobs whose pods each run ``taskscale worker --once``; every task completes
exactly once (0 duplicates, 0 reruns) and the Jobs created equal the tasks;
and a Job pod SIGKILLed mid-task: its task comes back through the lease (a
scheduler reaps it), gets a new Job and runs once more, nothing else does.
Prints the figures docs/benchmarks.md records (run with ``-s``).

No image is built (the Docker engine is not needed): the pod is the
one-file busybox image of tests/kube/test_local_node.py, and its container
runs this worktree's own ``taskscale`` through a chroot into the host's
filesystem (mounted read-only), on the host network, so it reaches the
test's Redis on loopback.  Everything else -- the Jobs, the kubelet, the
Downward API's POD_NAME, the registry, the lease -- is the real thing.
Run it under ``flock /work/wt/node.lock`` (one helper's pods at a time).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from jobburst_tasks import FINISHED, PODS, STARTED
from kubernetes import client

from support.kube import condition, controller_settings, create_scaler, get_scaler, install_crd
from support.kube_cluster import KubeCluster, wait_for
from support.workers import REPO, processes, start_scheduler
from taskscale.controller.job_spec import SCALER_LABEL
from taskscale.controller.kube import KubeController
from taskscale.controller.metrics import ControllerMetrics
from taskscale.keys import Keys
from taskscale.producer import Call, Producer

pytestmark = [pytest.mark.kube, pytest.mark.e2e]

TASKS = 10
TASK_S = 3.0


@pytest.fixture
def node_controller(
    kube_node_cluster: KubeCluster, kube_namespace: str
) -> Iterator[tuple[client.ApiClient, KubeController]]:
    with kube_node_cluster.api_client() as api:
        install_crd(api)
        settings = controller_settings(kube_namespace)
        ctl = KubeController(api, metrics=ControllerMetrics(), identity="test", settings=settings)
        ctl.start()
        try:
            yield api, ctl
        finally:
            ctl.stop()


def worker_pod(image: str, redis_url: str, *, lease: float = 10.0) -> dict[str, Any]:
    """A Job pod running ``taskscale worker --once`` of this worktree (see the docstring)."""
    worker = (
        f"cd {REPO} && exec .venv/bin/python -m taskscale.cli worker --once --once-wait 30"
        f" --types jobsleep --import jobburst_tasks --threads 1 --lease {lease} --heartbeat 1"
    )
    env = {
        "TASKSCALE_REDIS_URL": redis_url,
        "TASKSCALE_NAMESPACE": "taskscale",
        "PYTHONPATH": str(REPO / "tests" / "kube"),
        "HOME": "/tmp",
    }
    return {
        "hostNetwork": True,
        "terminationGracePeriodSeconds": 30,
        "containers": [
            {
                "name": "worker",
                "image": image,
                "imagePullPolicy": "Never",
                "args": ["chroot", "/host", "/bin/sh", "-c", worker],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "volumeMounts": [{"name": "host", "mountPath": "/host", "readOnly": True}],
            }
        ],
        "volumes": [{"name": "host", "hostPath": {"path": "/", "type": "Directory"}}],
    }


def job_scaler(image: str, redis_url: str, *, lease: float = 10.0) -> dict[str, Any]:
    pod = worker_pod(image, redis_url, lease=lease)
    return {
        "apiVersion": "taskscale.io/v1alpha1",
        "kind": "TaskScaler",
        "metadata": {"name": "burst"},
        "spec": {
            "redis": {"url": redis_url},
            "taskTypes": [{"name": "jobsleep"}],
            "maxReplicas": TASKS,
            "pollIntervalSeconds": 0.5,
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}},
        },
    }


def counts(r: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(key).items()}


def test_a_burst_of_tasks_becomes_as_many_jobs_each_task_run_once(
    node_controller: tuple[client.ApiClient, KubeController],
    kube_namespace: str,
    busybox_image: str,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    api, controller = node_controller
    ns, batch = kube_namespace, client.BatchV1Api(api)
    body = job_scaler(busybox_image, redis_url)
    create_scaler(api, ns, body)
    wait_for(lambda: condition(get_scaler(api, ns, "burst"), "Ready"), what="first status")

    started = time.monotonic()
    Producer(r, keys=keys).enqueue_many("jobsleep", [Call((n, TASK_S)) for n in range(TASKS)])
    first_start: list[float] = []

    def drained() -> bool:
        if not first_start and r.hlen(STARTED):
            first_start.append(time.monotonic() - started)
        return sum(counts(r, FINISHED).values()) >= TASKS

    wait_for(drained, timeout=300, interval=0.2, what=f"{TASKS} tasks run by Job pods")
    drain_s = time.monotonic() - started

    def all_jobs_succeeded() -> dict[str, int] | None:
        jobs = get_scaler(api, ns, "burst").get("status", {}).get("jobs") or {}
        return jobs if jobs.get("succeeded") == TASKS else None

    final = wait_for(all_jobs_succeeded, timeout=120, what="every Job succeeded")
    time.sleep(3.0)  # a few more passes: the empty queue must create nothing
    labels = {"namespace": ns, "name": "burst"}
    created = controller.metrics.sample("taskscale_jobs_created_total", labels)
    listed = batch.list_namespaced_job(ns, label_selector=f"{SCALER_LABEL}=burst").items
    figures = {
        "tasks": TASKS,
        "task_s": TASK_S,
        "jobs_created": created,
        "jobs_listed": len(listed),
        "first_task_started_s": round(first_start[0], 1) if first_start else None,
        "drained_s": round(drain_s, 1),
        "pods_used": len(set(r.hvals(PODS))),
    }
    print("\n[job-mode burst] " + json.dumps(figures))
    assert counts(r, STARTED) == {str(n): 1 for n in range(TASKS)}  # 0 reruns
    assert counts(r, FINISHED) == {str(n): 1 for n in range(TASKS)}  # 0 duplicates
    assert created == TASKS and len(listed) == TASKS  # one Job per task, no more
    assert len(set(r.hvals(PODS))) == TASKS  # each task in a pod of its own
    assert final == {"pending": 0, "running": 0, "succeeded": TASKS, "failed": 0}
    assert int(r.hget(keys.stats("jobsleep"), "completed") or 0) == TASKS
    assert int(r.hget(keys.active, "jobsleep") or 0) == 0


def worker_pid(pod: str) -> int | None:
    """The pid of the ``taskscale worker`` process of ``pod`` on this host (the
    local node's containers are processes here), by its POD_NAME."""
    wanted = f"POD_NAME={pod}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if wanted in environ and b"taskscale.cli" in cmdline:
            return int(proc.name)
    return None


def test_a_job_pod_killed_mid_task_returns_its_task_through_the_lease(
    node_controller: tuple[client.ApiClient, KubeController],
    kube_namespace: str,
    busybox_image: str,
    r: redis.Redis,
    redis_url: str,
    keys: Keys,
) -> None:
    api, controller = node_controller
    ns = kube_namespace
    create_scaler(api, ns, job_scaler(busybox_image, redis_url, lease=3.0))
    wait_for(lambda: condition(get_scaler(api, ns, "burst"), "Ready"), what="first status")
    Producer(r, keys=keys).enqueue_many("jobsleep", [Call((n, 8.0)) for n in range(3)])
    wait_for(lambda: counts(r, STARTED).get("0") == 1, timeout=120, what="task 0 started")
    pod = r.hget(PODS, "0")
    assert pod is not None
    pid = wait_for(lambda: worker_pid(pod.decode()), timeout=10, what="its worker process")
    os.kill(pid, signal.SIGKILL)  # no shutdown code runs: the lease must bring it back
    with processes(start_scheduler(redis_url, lease=3.0)):  # the reaper
        wait_for(
            lambda: counts(r, FINISHED) == {"0": 1, "1": 1, "2": 1},
            timeout=180,
            interval=0.5,
            what="every task finished, task 0 on a new Job",
        )

    def ended() -> dict[str, int] | None:
        jobs = get_scaler(api, ns, "burst").get("status", {}).get("jobs") or {}
        return jobs if jobs.get("succeeded") == 3 and jobs.get("failed") == 1 else None

    final = wait_for(ended, timeout=120, what="3 Jobs succeeded, the killed one failed")
    labels = {"namespace": ns, "name": "burst"}
    created = controller.metrics.sample("taskscale_jobs_created_total", labels)
    print(f"\n[job-mode kill] started={counts(r, STARTED)} jobs_created={created} status={final}")
    assert counts(r, STARTED) == {"0": 2, "1": 1, "2": 1}  # only the killed task ran twice
    assert created == 4  # one Job per task, and one for the task that came back
    assert final == {"pending": 0, "running": 0, "succeeded": 3, "failed": 1}
    assert int(r.hget(keys.stats("jobsleep"), "completed") or 0) == 3
