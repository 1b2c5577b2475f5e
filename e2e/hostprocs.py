"""Controllers and workers as host processes, for clusters without a kubelet.

:class:`ControllerProcesses` runs ``taskscale controller`` replicas on the
host, leader-elected and authenticated as the chart's ServiceAccount (so the
chart's RBAC is what they get); :class:`DeploymentFollower` is a kubelet
stand-in that keeps ``taskscale worker`` processes at the Deployment's
replicas. Both see the environment through :class:`Release`, which
e2e.environment's ``E2E`` satisfies.
"""

# ruff: noqa: I001  (import order matters: see below)
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Protocol

import yaml

# e2e.support first: it puts tests/ on sys.path (for support.*).
from e2e.support import free_port
from support.chart import service_account_token
from support.kube_cluster import KubeCluster
from e2e.release import RELEASE, TYPES, WORKER
from taskscale.controller.local import LocalPool, LocalPoolSettings


class Release(Protocol):
    """The installed chart, as the host processes need it."""

    cluster: KubeCluster
    namespace: str

    def replicas(self) -> int: ...


def service_account_kubeconfig(env: Release, path: Path) -> Path:
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

    def __init__(self, env: Release, *, log_dir: Path) -> None:
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

    def __init__(self, env: Release, redis_url: str) -> None:
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
