"""Installing charts/taskscale with its examples, and waiting until it is ready."""

# ruff: noqa: I001  (import order matters: see below)
from __future__ import annotations

import tempfile

import redis
import yaml
from kubernetes import client

# e2e.support first: it puts tests/ on sys.path (for support.*).
import e2e.support  # noqa: F401
from support.chart import CHART, adopt_crd_if_present, helm
from support.kube_cluster import wait_for
from e2e.environment import E2E
from e2e.release import LOCAL_REDIS_CLUSTER_IP, RELEASE, TYPES, WORKER


def wait_ready(env: E2E) -> None:
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


def pod_ip(env: E2E, component: str) -> str:
    with env.cluster.api_client() as api:
        pods = client.CoreV1Api(api).list_namespaced_pod(
            env.namespace, label_selector=f"app.kubernetes.io/component={component}"
        )
    ips = [p.status.pod_ip for p in pods.items if p.status and p.status.pod_ip]
    assert len(ips) == 1, f"{component}: pod IPs {ips}"
    return str(ips[0])


def redis_values(images: dict[str, str], redis_pod: bool) -> dict[str, object]:
    if not redis_pod:
        return {"enabled": False}
    repo, tag = images["example-redis"].rsplit(":", 1)
    return {
        "enabled": True,
        "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
        "clusterIP": LOCAL_REDIS_CLUSTER_IP,
    }


def install_chart(
    env: E2E, images: dict[str, str], *, worker_redis_url: str, redis_pod: bool
) -> None:
    def repo_tag(image: str) -> tuple[str, str]:
        repo, tag = image.rsplit(":", 1)
        return repo, tag

    ctl_repo, ctl_tag = repo_tag(images["controller"])
    wrk_repo, wrk_tag = repo_tag(images["worker"])
    worker_image = {"repository": wrk_repo, "tag": wrk_tag, "pullPolicy": "Never"}
    values = {
        "image": {"repository": ctl_repo, "tag": ctl_tag, "pullPolicy": "Never"},
        "controller": {
            # Without a kubelet, the controllers run on the host (see module doc).
            "replicas": 2 if env.pods else 0,
            "leaderElection": {"enabled": True},
            "logLevel": "debug",
        },
        # The chart's own scheduler, on the examples' Redis (none in host mode).
        "scheduler": {"enabled": env.pods, "image": worker_image},
        "examples": {
            "enabled": True,
            "redis": redis_values(images, redis_pod),
            "redisUrl": worker_redis_url,
            "worker": {
                "image": worker_image,
                "types": list(TYPES),
                "threads": 4,
                "longestTaskSeconds": 45,  # > the 30 s tasks of e2e/test_rollout.py
            },
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
