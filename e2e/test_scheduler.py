"""Delayed tasks and retries on the real cluster run because the chart's own
scheduler runs.

The chart deploys ``taskscale scheduler`` (two replicas) beside the
controller. The scenario first scales that Deployment to 0 and shows the
stall a missing scheduler causes -- delayed tasks stay delayed, a failed
task's retry never runs -- then gives the scheduler back and sees every task
finish: the delayed ones complete, the failing one is retried until it is
dead-lettered. Host mode has no chart scheduler (no kubelet), so the scenario
needs pods.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import E2E, RELEASE
from support.kube_cluster import wait_for
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.status import collect

pytestmark = pytest.mark.timeout(900)

KEYS = Keys("taskscale")
SCHEDULER = f"{RELEASE}-taskscale-scheduler"
DELAYED = 8
STALL_S = 12  # how long the tasks are watched not running without a scheduler


def _types(env: E2E) -> dict[str, dict[str, Any]]:
    types: dict[str, dict[str, Any]] = collect(env.redis(), KEYS)["types"]
    return types


def _stat(env: E2E, task_type: str, field: str) -> int:
    return int(_types(env).get(task_type, {}).get("stats", {}).get(field, 0))


def _scale_scheduler(env: E2E, replicas: int) -> None:
    with env.cluster.api_client() as api:
        client.AppsV1Api(api).patch_namespaced_deployment_scale(
            SCHEDULER, env.namespace, {"spec": {"replicas": replicas}}
        )


def _schedulers_alive(env: E2E) -> list[str]:
    return list(collect(env.redis(), KEYS)["schedulers"])


def _scheduler_pod_ips(env: E2E) -> list[str]:
    with env.cluster.api_client() as api:
        pods = client.CoreV1Api(api).list_namespaced_pod(
            env.namespace, label_selector="app.kubernetes.io/component=scheduler"
        )
    return [
        str(p.status.pod_ip)
        for p in pods.items
        if p.status and p.status.pod_ip and p.status.phase == "Running"
        if p.metadata and p.metadata.deletion_timestamp is None
    ]


def _promoted(ip: str) -> float:
    try:
        with urllib.request.urlopen(f"http://{ip}:9110/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("taskscale_scheduler_promoted_tasks_total "):
            return float(line.split()[1])
    return 0.0


def test_delayed_tasks_and_retries_run_only_while_the_charts_scheduler_runs(e2e: E2E) -> None:
    if not e2e.pods:
        pytest.skip("host mode runs no chart scheduler (no kubelet)")
    wait_for(lambda: len(_schedulers_alive(e2e)) == 2, timeout=120, what="2 schedulers alive")
    assert all(s.startswith(f"{SCHEDULER}-") for s in _schedulers_alive(e2e))

    completed_before = _stat(e2e, "sleep", "completed")
    failed_before, dead_before = _stat(e2e, "fail", "failed"), _stat(e2e, "fail", "dead")
    _scale_scheduler(e2e, 0)
    try:
        # A stopping scheduler removes its heartbeat: no scheduler is alive.
        wait_for(lambda: not _schedulers_alive(e2e), timeout=60, what="no scheduler alive")
        producer = Producer(e2e.redis(), keys=KEYS)
        producer.enqueue_many("sleep", [[0.2] for _ in range(DELAYED)], delay=2.0)
        producer.enqueue("fail", "e2e", max_retries=2)
        stalled_at = time.monotonic()
        wait_for(
            lambda: _stat(e2e, "fail", "failed") > failed_before,
            timeout=180,
            what="the failing task's first attempt",
        )
        time.sleep(max(0.0, STALL_S - (time.monotonic() - stalled_at)))
        types = _types(e2e)
        # Without a scheduler: the delayed tasks are due but never ready, the
        # retry never runs, nothing is dead-lettered.
        assert types["sleep"]["delayed"] >= DELAYED
        assert _stat(e2e, "sleep", "completed") == completed_before
        assert _stat(e2e, "fail", "failed") - failed_before == 1
        assert _stat(e2e, "fail", "dead") == dead_before
        warnings = collect(e2e.redis(), KEYS)["warnings"]
        assert any("no scheduler is alive" in w for w in warnings), warnings
    finally:
        _scale_scheduler(e2e, 2)
    restored_at = time.monotonic()
    wait_for(
        lambda: _stat(e2e, "sleep", "completed") - completed_before >= DELAYED,
        timeout=300,
        interval=0.5,
        what=f"{DELAYED} delayed tasks completed",
    )
    delayed_done_s = time.monotonic() - restored_at
    wait_for(
        lambda: _stat(e2e, "fail", "dead") > dead_before,
        timeout=300,
        interval=0.5,
        what="the failing task retried twice, then dead-lettered",
    )
    retried_done_s = time.monotonic() - restored_at
    assert _stat(e2e, "sleep", "completed") - completed_before == DELAYED
    assert _stat(e2e, "fail", "failed") - failed_before == 3  # the first run and 2 retries
    assert _stat(e2e, "fail", "dead") - dead_before == 1
    wait_for(lambda: len(_schedulers_alive(e2e)) == 2, timeout=120, what="2 schedulers back")
    promoted = sum(_promoted(ip) for ip in _scheduler_pod_ips(e2e))
    assert promoted >= DELAYED + 2, promoted  # the delayed tasks and the two retries
    print(
        f"\n[e2e] scenario 5: without a scheduler, 0/{DELAYED} delayed tasks and no retry ran "
        f"in {STALL_S} s; with the chart's scheduler back, the delayed tasks completed in "
        f"{delayed_done_s:.1f} s and the failing task was dead-lettered after 2 retries in "
        f"{retried_done_s:.1f} s ({promoted:.0f} promoted, per the schedulers' metrics)"
    )
