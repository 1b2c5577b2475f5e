"""The whole loop: enqueue -> the controller scales the worker Deployment -> the
work drains -> back to zero; with scale-down mid-run, Prometheus watching, and
the leading controller killed.

The chart is installed once per session (see conftest.py); each scenario
starts from an idle queue and a Deployment at 0 and waits, bounded, for
outcomes. Timings printed with ``-s`` are observations, not assertions.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from e2e.environment import E2E
from e2e.release import WORKER
from e2e.support import REPO, free_port
from support.kube_cluster import wait_for
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.status import collect

pytestmark = pytest.mark.timeout(1200)  # the first test also waits for the session setup

KEYS = Keys("taskscale")
IDLE_THRESHOLD_S = 10  # chartinstall.py's examples.taskScaler.idleThresholdSeconds


def _type_state(env: E2E, task_type: str = "sleep") -> dict[str, Any]:
    types: dict[str, dict[str, Any]] = collect(env.redis(), KEYS)["types"]
    empty = {"queued": 0, "active": 0, "completed": 0, "failed": 0, "dead": 0}
    return types.get(task_type, empty)


def _idle_at_zero(env: E2E) -> None:
    wait_for(lambda: env.replicas() == 0, timeout=180, what="the worker Deployment back at 0")
    state = _type_state(env)
    assert state["queued"] == 0 and state["active"] == 0


def _enqueue(env: E2E, count: int, seconds: float) -> int:
    """Enqueue ``count`` sleep tasks; return the completed counter before them."""
    before = int(_type_state(env)["completed"])
    Producer(env.redis(), keys=KEYS).enqueue_many("sleep", [[seconds] for _ in range(count)])
    return before


def _print(message: str) -> None:
    print(f"\n[e2e] {message}")


# --- (1) from zero, through 200 tasks, back to zero --------------------------------


def test_200_tasks_scale_deployment_up_from_zero_complete_and_scale_back_to_zero(
    e2e: E2E,
) -> None:
    _idle_at_zero(e2e)
    started = time.monotonic()
    before = _enqueue(e2e, 200, 0.5)
    wait_for(lambda: e2e.replicas() > 0, timeout=30, interval=0.05, what="a scale-up from 0")
    scaled_up_s = time.monotonic() - started
    peak = 0
    workers: set[str] = set()  # worker ids registered while the tasks ran

    def all_done() -> bool:
        nonlocal peak
        peak = max(peak, e2e.replicas())
        workers.update(str(w["id"]) for w in collect(e2e.redis(), KEYS)["workers"])
        return int(_type_state(e2e)["completed"]) - before >= 200

    wait_for(all_done, timeout=600, interval=0.5, what="200 tasks completed")
    drained_at = time.monotonic()
    state = _type_state(e2e)
    assert int(state["completed"]) - before == 200
    assert state["active"] == 0 and state["queued"] == 0 and state["dead"] == 0
    assert int(e2e.redis().hget(KEYS.active, "sleep") or 0) == 0
    assert peak > 1  # 200 tasks at 4 per replica needed more than one
    # The Deployment's workers did it (pods, or host processes in host mode),
    # several of them: worker ids start with their pod's name.
    assert workers and all(w.startswith(f"{WORKER}-") for w in workers), workers
    assert len(workers) > 1, workers

    wait_for(lambda: e2e.replicas() == 0, timeout=180, what="scale back to zero")
    to_zero_s = time.monotonic() - drained_at
    # Not before every type was idle for its threshold (minus polling slack).
    assert to_zero_s >= IDLE_THRESHOLD_S - 2
    _print(
        f"scenario 1: first replica after {scaled_up_s:.2f} s, peak {peak} replicas, "
        f"drained in {drained_at - started:.1f} s, back to 0 {to_zero_s:.1f} s after the last task"
    )


# --- (2) scale-down while tasks run -------------------------------------------------


def _patch_scaler(env: E2E, spec: dict[str, Any]) -> None:
    with env.cluster.api_client() as api:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            "taskscale.io", "v1alpha1", env.namespace, "taskscalers", WORKER, {"spec": spec}
        )


def test_scale_down_while_tasks_run_loses_no_task(e2e: E2E) -> None:
    _idle_at_zero(e2e)
    before = _enqueue(e2e, 40, 4.0)
    requeued_before = int(_type_state(e2e).get("stats", {}).get("requeued", 0))
    wait_for(lambda: e2e.replicas() >= 3, timeout=60, what="at least 3 replicas")
    wait_for(
        lambda: _type_state(e2e)["active"] >= 8, timeout=120, what="tasks running on several pods"
    )
    # Cap the scaler at 1 while every worker is busy: the controller must
    # scale down now, and the removed workers drain (SIGTERM).
    _patch_scaler(e2e, {"maxReplicas": 1})
    try:
        wait_for(lambda: e2e.replicas() == 1, timeout=60, what="the forced scale-down to 1")
        assert _type_state(e2e)["active"] > 0  # it really happened mid-run
    finally:
        _patch_scaler(e2e, {"maxReplicas": 10})
    wait_for(
        lambda: int(_type_state(e2e)["completed"]) - before >= 40,
        timeout=600,
        interval=0.5,
        what="all 40 tasks completed",
    )
    state = _type_state(e2e)
    assert int(state["completed"]) - before == 40  # each exactly once
    assert state["failed"] == 0 and state["dead"] == 0
    assert state["queued"] == 0 and state["active"] == 0
    requeued = int(state.get("stats", {}).get("requeued", 0)) - requeued_before
    _print(f"scenario 2: 40/40 completed after a mid-run scale-down; {requeued} returned to queue")
    _idle_at_zero(e2e)


# --- (3) a real Prometheus scraping the controllers --------------------------------


@pytest.fixture
def prometheus(e2e: E2E) -> Iterator[str]:
    """Debian's prometheus scraping every controller; yields its base URL."""
    if e2e.controllers is not None:
        targets = [f"127.0.0.1:{port}" for port in e2e.controllers.ports.values()]
    else:
        with e2e.cluster.api_client() as api:
            pods = client.CoreV1Api(api).list_namespaced_pod(
                e2e.namespace, label_selector="app.kubernetes.io/component=controller"
            )
        targets = [f"{p.status.pod_ip}:9090" for p in pods.items if p.status and p.status.pod_ip]
    workdir = Path(tempfile.mkdtemp(prefix="ts-e2e-prom-"))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(REPO / "deploy/prometheus/taskscale-alerts.yaml")],
        "scrape_configs": [{"job_name": "taskscale", "static_configs": [{"targets": targets}]}],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                "/usr/bin/prometheus",
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _query(url, "up") is not None, timeout=60, what="prometheus ready")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)
    except OSError:
        return None


def _query(base: str, expr: str) -> list[Any] | None:
    body = _get(f"{base}/api/v1/query?query={urllib.parse.quote(expr)}")
    return None if body is None else list(body["data"]["result"])


def test_prometheus_sees_desired_replicas_follow_the_run(e2e: E2E, prometheus: str) -> None:
    _idle_at_zero(e2e)
    wait_for(
        lambda: _query(prometheus, 'up{job="taskscale"} == 1'),
        timeout=60,
        what="Prometheus scraping a controller",
    )
    start = time.time()
    before = _enqueue(e2e, 60, 1.0)
    wait_for(
        lambda: int(_type_state(e2e)["completed"]) - before >= 60, timeout=600, what="60 tasks done"
    )
    _idle_at_zero(e2e)
    time.sleep(3)  # a few more scrapes at 0
    expr = urllib.parse.quote("max(taskscale_desired_replicas)")
    body = _get(
        f"{prometheus}/api/v1/query_range?query={expr}&start={start}&end={time.time()}&step=1"
    )
    assert body is not None and body["data"]["result"], body
    values = [float(v) for _, v in body["data"]["result"][0]["values"]]
    assert max(values) >= 2, values  # rose with the work...
    assert values[-1] == 0, values  # ...and fell back to zero
    leaders = _query(prometheus, "sum(taskscale_leader)")
    assert leaders and float(leaders[0]["value"][1]) == 1  # exactly one leader scraped
    _print(f"scenario 3: desired replicas in Prometheus peaked at {max(values):.0f}, ended at 0")


# --- (4) the leading controller dies mid-run ----------------------------------------


def _leader(env: E2E) -> str | None:
    with env.cluster.api_client() as api:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            "taskscale-controller", env.namespace
        )
    return lease.spec.holder_identity if lease.spec else None


def test_killing_the_leading_controller_mid_run_hands_over_and_loses_nothing(e2e: E2E) -> None:
    _idle_at_zero(e2e)
    before = _enqueue(e2e, 80, 1.0)
    wait_for(lambda: e2e.replicas() > 0, timeout=30, what="a scale-up")
    leader = wait_for(lambda: _leader(e2e), timeout=30, what="a lease holder")
    killed_at = time.monotonic()
    if e2e.controllers is not None:
        e2e.controllers.kill(leader)  # SIGKILL: no lease release
        e2e.controllers.start(1)  # what the Deployment would do
    else:
        with e2e.cluster.api_client() as api:
            client.CoreV1Api(api).delete_namespaced_pod(
                leader, e2e.namespace, grace_period_seconds=0
            )
    new_leader = wait_for(
        lambda: (holder := _leader(e2e)) not in (None, leader) and holder,
        timeout=120,
        what="a standby taking the lease",
    )
    takeover_s = time.monotonic() - killed_at
    wait_for(
        lambda: int(_type_state(e2e)["completed"]) - before >= 80,
        timeout=600,
        interval=0.5,
        what="all 80 tasks completed",
    )
    state = _type_state(e2e)
    assert int(state["completed"]) - before == 80
    assert state["dead"] == 0 and state["active"] == 0
    # The new leader also finishes the job: back to zero.
    _idle_at_zero(e2e)
    _print(f"scenario 4: {leader} killed, {new_leader} took over in {takeover_s:.1f} s; 80/80 done")
