"""What the e2e scenarios act on: the :class:`E2E` environment."""

# ruff: noqa: I001  (import order matters: see below)
from __future__ import annotations

from dataclasses import dataclass

import redis
from kubernetes import client

# e2e.support first: it puts tests/ on sys.path (for support.*).
import e2e.support  # noqa: F401
from support.kube_cluster import KubeCluster
from e2e.hostprocs import ControllerProcesses, DeploymentFollower
from e2e.release import WORKER


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
