"""A rollout in the middle of 30 s tasks, with real pods: no task is cut and
none runs twice (docs/operating.md, "Rollouts that do not cut tasks").

The chart's example worker takes ``--grace`` and its pod's
``terminationGracePeriodSeconds`` from ``longestTaskSeconds`` (45 s in
chartinstall.py) and rolls out with ``maxSurge: 1, maxUnavailable: 0``; the
controller holds a scale-down while the rollout is in progress. Runs are
counted in Redis: a task's every run starts with a claim (stats ``claimed``),
and a task cut by a shutdown goes back to its queue (stats ``requeued``) or,
if its pod was killed, is returned by the reaper (``requeued`` too). So
``claimed - tasks`` is the reruns and ``requeued`` the interrupted tasks.
The figure printed with ``-s`` is recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from e2e.environment import E2E
from e2e.release import WORKER
from support.kube_cluster import wait_for
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.status import collect

pytestmark = pytest.mark.timeout(1200)  # the first test of a session waits for its setup

KEYS = Keys("taskscale")
TASKS, TASK_S = 16, 30.0  # 4 pods of 4 threads, all busy when the rollout starts


def stats(env: E2E) -> dict[str, int]:
    raw = env.redis().hgetall(KEYS.stats("sleep"))
    return {k.decode(): int(v) for k, v in raw.items() if v.isdigit()}


def active(env: E2E) -> int:
    return int(env.redis().hget(KEYS.active, "sleep") or 0)


def deployment(env: E2E) -> Any:
    with env.cluster.api_client() as api:
        return client.AppsV1Api(api).read_namespaced_deployment_status(WORKER, env.namespace)


def rolled_out(d: Any) -> bool:
    """`kubectl rollout status`'s rule: observed, all updated, no old pod, all available."""
    want, st = d.spec.replicas or 0, d.status
    return (
        (st.observed_generation or 0) >= (d.metadata.generation or 0)
        and (st.updated_replicas or 0) >= want
        and (st.replicas or 0) <= (st.updated_replicas or 0)
        and (st.available_replicas or 0) >= (st.updated_replicas or 0)
    )


def rollout_restart(env: E2E) -> None:
    """What `kubectl rollout restart` does: a new annotation on the pod template."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = {
        "spec": {
            "template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": now}}}
        }
    }
    with env.cluster.api_client() as api:
        client.AppsV1Api(api).patch_namespaced_deployment(WORKER, env.namespace, patch)


def rollout_hold(env: E2E) -> bool:
    with env.cluster.api_client() as api:
        obj: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "taskscale.io", "v1alpha1", env.namespace, "taskscalers", WORKER
        )
    return bool((obj.get("status") or {}).get("rolloutHold"))


def test_a_rollout_during_30_s_tasks_interrupts_none_and_reruns_none(e2e: E2E) -> None:
    if not e2e.pods:
        pytest.skip("a rollout replaces pods: needs real pods (host mode follows replicas only)")
    wait_for(lambda: e2e.replicas() == 0, timeout=180, what="the worker Deployment back at 0")
    before = stats(e2e)
    Producer(e2e.redis(), keys=KEYS).enqueue_many("sleep", [[TASK_S] for _ in range(TASKS)])
    wait_for(lambda: active(e2e) == TASKS, timeout=240, interval=0.5, what="all tasks running")
    pods_before = {str(w["pod"]) for w in collect(e2e.redis(), KEYS)["workers"]}

    started = time.monotonic()
    rollout_restart(e2e)
    held = False
    rollout_s: float | None = None
    after = before
    deadline = started + 600
    while time.monotonic() < deadline:
        held = held or rollout_hold(e2e)
        if rollout_s is None and rolled_out(deployment(e2e)):
            rollout_s = time.monotonic() - started
        after = stats(e2e)
        if (
            rollout_s is not None
            and after.get("completed", 0) - before.get("completed", 0) >= TASKS
        ):
            break
        time.sleep(0.5)
    done_s = time.monotonic() - started

    def delta(name: str) -> int:
        return after.get(name, 0) - before.get(name, 0)

    assert rollout_s is not None, "the rollout did not finish"
    assert delta("completed") == TASKS, after
    reruns, interrupted = delta("claimed") - TASKS, delta("requeued")
    assert (interrupted, reruns) == (0, 0)
    assert delta("failed") == 0 and delta("dead") == 0

    # the tasks ran on the old pods, which the rollout replaced: an old pod's
    # worker leaves the registry as it exits, a moment after its last task
    def pods_now() -> set[str]:
        return {str(w["pod"]) for w in collect(e2e.redis(), KEYS)["workers"]}

    wait_for(lambda: not pods_before & pods_now(), timeout=60, what="the old pods' workers gone")
    assert pods_before and not pods_before & pods_now()
    print(
        f"\n[e2e] rollout during {TASKS} x {TASK_S:g} s tasks on {len(pods_before)} pods: "
        f"{delta('completed')} completed, {interrupted} interrupted, {reruns} reruns; "
        f"rollout complete {rollout_s:.1f} s after the restart, last task done at "
        f"{done_s:.1f} s; scale-down held for the rollout: {'yes' if held else 'not seen'}"
    )
    wait_for(lambda: e2e.replicas() == 0, timeout=180, what="back to 0 after the rollout")
