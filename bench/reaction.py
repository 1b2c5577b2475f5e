"""Scale-from-zero reaction time on a real API server: enqueue -> scale patch.

Why: a target at zero replicas has no worker to notice new work, so the time
from the enqueue to the Deployment's scale change is the whole of the wait
the controller adds to a first task.  KEDA polls (30 s by default); taskscale
also wakes on the demand signal the enqueue script publishes.  Goal: p50
under 100 ms.

What runs: a real redis-server, the local control plane of
e2e/cluster/localcluster.py (etcd, kube-apiserver, kube-controller-manager)
or the cluster of ``--kubeconfig``, the TaskScaler CRD, and two controllers
in this process, each on its own namespace, Deployment and Redis key
namespace, both with the same poll interval:

* ``demand``: the controller as shipped (poll + demand wake);
* ``poll``: the same controller with the demand listener off -- the peer,
  i.e. what any poll-only autoscaler gets at this interval.

Each run: wait until the Deployment is at 0 and the controller has seen it,
sleep a random fraction of the poll interval (so the poll's phase is
uniform, as for real traffic), take the time, enqueue one task with the
runtime's producer, and take the time again when a watch on Deployments
delivers ``spec.replicas >= 1``.  The task is then deleted, so the next poll
scales back to 0.  Modes alternate run by run, so background load on this
shared machine hits both alike.

Run: ``.venv/bin/python -m bench.reaction [--runs 30] [--poll-interval 2]
[--kubeconfig PATH] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import yaml
from kubernetes import client, watch

from taskscale.controller.kube import (
    GROUP,
    PLURAL,
    VERSION,
    ControllerSettings,
    KubeController,
    install_crd,
    load_api_client,
)
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import ReconcilerSettings
from taskscale.demo.localredis import LocalRedis
from taskscale.keys import Keys
from taskscale.producer import Producer

REPO = Path(__file__).resolve().parent.parent
CRD = REPO / "deploy" / "crd" / "taskscaler.yaml"
TASK_TYPE = "bench"
TARGET = "worker"


@dataclass
class Mode:
    """One controller under test, with its own namespace and Redis key namespace."""

    name: str
    listen: bool
    namespace: str
    keys: Keys
    controller: KubeController | None = None
    events: queue.Queue[tuple[float, int]] = field(default_factory=queue.Queue)
    samples_ms: list[float] = field(default_factory=list)


@contextmanager
def cluster(kubeconfig: str | None) -> Iterator[client.ApiClient]:
    if kubeconfig:
        api = load_api_client(kubeconfig)
        try:
            yield api
        finally:
            api.close()  # type: ignore[no-untyped-call]
        return
    sys.path.insert(0, str(REPO))
    from e2e.cluster.localcluster import LocalCluster

    with LocalCluster() as local:
        api = load_api_client(str(local.kubeconfig))
        try:
            yield api
        finally:
            api.close()  # type: ignore[no-untyped-call]


def deployment() -> client.V1Deployment:
    labels = {"app": TARGET}
    container = client.V1Container(name="worker", image="registry.invalid/taskscale/none:0")
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=TARGET),
        spec=client.V1DeploymentSpec(
            replicas=0,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container]),
            ),
        ),
    )


def taskscaler(redis_url: str, keys: Keys, poll_s: float) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TaskScaler",
        "metadata": {"name": "bench"},
        "spec": {
            "scaleTargetRef": {"name": TARGET},
            "redis": {"url": redis_url, "namespace": keys.namespace},
            "taskTypes": [{"name": TASK_TYPE, "idleThresholdSeconds": 0}],
            "minReplicas": 0,
            "maxReplicas": 5,
            "scaleDownStabilizationSeconds": 0,
            "pollIntervalSeconds": poll_s,
        },
    }


def setup(api: client.ApiClient, mode: Mode, redis_url: str, poll_s: float) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=mode.namespace)))
    apps.create_namespaced_deployment(mode.namespace, deployment())
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, mode.namespace, PLURAL, taskscaler(redis_url, mode.keys, poll_s)
    )
    threading.Thread(target=watch_replicas, args=(api, mode), daemon=True).start()
    settings = ControllerSettings(
        watch_namespace=mode.namespace,
        reconciler=ReconcilerSettings(listen_for_demand=mode.listen),
    )
    mode.controller = KubeController(
        api, metrics=ControllerMetrics(), identity=f"bench-{mode.name}", settings=settings
    ).start()


def watch_replicas(api: client.ApiClient, mode: Mode) -> None:
    """Push (arrival time, spec.replicas) for every change of the Deployment."""
    apps = client.AppsV1Api(api)
    while True:
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            apps.list_namespaced_deployment, mode.namespace, timeout_seconds=300
        )
        for event in stream:
            obj: Any = event["object"]
            mode.events.put((time.perf_counter(), int(obj.spec.replicas or 0)))


def wait_idle(mode: Mode, r: redis.Redis, timeout: float = 120.0) -> None:
    """Until the Deployment is at 0 and the controller's last pass saw 0."""
    assert mode.controller is not None
    metrics, scaler = mode.controller.metrics, {"namespace": mode.namespace, "name": "bench"}
    for key in mode.keys.queues(TASK_TYPE):
        r.delete(key)
    deadline = time.monotonic() + timeout
    while True:
        current = metrics.sample("taskscale_current_replicas", scaler)
        desired = metrics.sample("taskscale_desired_replicas", scaler)
        if current == 0 and desired == 0:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{mode.name}: not back at 0 ({current}, {desired})")
        time.sleep(0.05)
    while not mode.events.empty():  # forget the scale-down events
        mode.events.get_nowait()


def one_run(mode: Mode, producer: Producer, poll_s: float, rng: random.Random) -> float:
    time.sleep(rng.uniform(0, poll_s))
    started = time.perf_counter()
    producer.enqueue(TASK_TYPE, task_id=uuid.uuid4().hex)
    deadline = started + 10 * poll_s + 30
    while True:
        arrived, replicas = mode.events.get(timeout=max(0.01, deadline - time.perf_counter()))
        if replicas >= 1:
            return (arrived - started) * 1000.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": statistics.median(values),
        "p90_ms": percentile(values, 0.9),
        "max_ms": max(values),
        "min_ms": min(values),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="measurements per mode")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="seconds, both modes")
    parser.add_argument("--kubeconfig", help="use this cluster instead of a local control plane")
    parser.add_argument("--json", help="write the samples and summaries here")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    suffix = uuid.uuid4().hex[:6]
    modes = [
        Mode("demand", True, f"bench-demand-{suffix}", Keys(f"bench-demand-{suffix}")),
        Mode("poll", False, f"bench-poll-{suffix}", Keys(f"bench-poll-{suffix}")),
    ]
    with LocalRedis() as server, cluster(args.kubeconfig) as api:
        install_crd(api, yaml.safe_load(CRD.read_text()))
        r = redis.Redis.from_url(server.url)
        for mode in modes:
            setup(api, mode, server.url, args.poll_interval)
        producers = {m.name: Producer(r, keys=m.keys) for m in modes}
        try:
            for run in range(args.runs):
                for mode in modes if run % 2 == 0 else reversed(modes):
                    wait_idle(mode, r)
                    sample = one_run(mode, producers[mode.name], args.poll_interval, rng)
                    mode.samples_ms.append(sample)
                print(
                    f"run {run + 1}/{args.runs}: "
                    + ", ".join(f"{m.name} {m.samples_ms[-1]:.1f} ms" for m in modes),
                    flush=True,
                )
        finally:
            for mode in modes:
                if mode.controller is not None:
                    mode.controller.stop()
            for mode in modes:
                client.CoreV1Api(api).delete_namespace(mode.namespace)
    report(modes, args)
    return 0


def report(modes: list[Mode], args: argparse.Namespace) -> None:
    results = {m.name: summary(m.samples_ms) for m in modes}
    ratio = results["poll"]["p50_ms"] / results["demand"]["p50_ms"]
    print(
        f"\nscale-from-zero reaction, poll interval {args.poll_interval} s, {args.runs} runs each"
    )
    for name, s in results.items():
        print(
            f"  {name:7s} p50 {s['p50_ms']:8.1f} ms  p90 {s['p90_ms']:8.1f} ms  "
            f"min {s['min_ms']:7.1f} ms  max {s['max_ms']:8.1f} ms"
        )
    print(f"  poll-only p50 / demand-wake p50 = {ratio:.1f}x")
    if args.json:
        payload = {
            "poll_interval_s": args.poll_interval,
            "runs": args.runs,
            "summary": results,
            "ratio_poll_over_demand_p50": ratio,
            "samples_ms": {m.name: m.samples_ms for m in modes},
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    sys.exit(main())
