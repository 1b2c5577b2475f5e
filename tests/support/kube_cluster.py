"""pytest plugin: a real Kubernetes API server for tests marked ``kube``.

``kube_cluster`` (session scope) starts the local control plane of
:mod:`e2e.cluster.localcluster` once per test session: a few seconds when the
binaries are cached, a long one-off build (announced on the terminal) when
they are not. With ``KUBECONFIG`` set and ``TASKSCALE_TEST_USE_KUBECONFIG=1``
it starts nothing and uses that cluster instead (kind, or any other), so the
same tests run against both.

``kube_node_cluster`` (session scope, root only) adds a real node to a local
cluster -- containerd, kubelet, scheduler, kube-proxy -- so pods really run; with an
existing cluster it is that cluster. ``kube_namespace`` gives each test its
own namespace and deletes it after.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from kubernetes import client, config

from e2e.cluster.localcluster import Binaries, LocalCluster, ensure_binaries
from support.waiting import wait_until

__all__ = ["KubeCluster", "kube_cluster", "kube_namespace", "kube_node_cluster", "wait_for"]

USE_KUBECONFIG_ENV = "TASKSCALE_TEST_USE_KUBECONFIG"
T = TypeVar("T")


@dataclass(frozen=True)
class KubeCluster:
    """A reachable cluster: its admin kubeconfig and API server URL."""

    kubeconfig: Path
    server: str
    local: LocalCluster | None = None  # None when an existing cluster is used

    def configuration(self) -> client.Configuration:
        """A fresh client Configuration loaded from the admin kubeconfig."""
        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig),
            client_configuration=configuration,
            persist_config=False,
        )
        return configuration

    def api_client(self) -> client.ApiClient:
        """An admin ApiClient; use it as a context manager so it is closed."""
        return client.ApiClient(self.configuration())

    def token_client(self, token: str) -> client.ApiClient:
        """An ApiClient that authenticates with a bearer token only (no client cert)."""
        admin = self.configuration()
        configuration = client.Configuration()
        configuration.host = admin.host
        configuration.ssl_ca_cert = admin.ssl_ca_cert
        configuration.verify_ssl = admin.verify_ssl
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(configuration)


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "condition",
) -> T:
    """:func:`support.waiting.wait_until` with the longer defaults an API
    server's eventual consistency needs."""
    return wait_until(probe, timeout=timeout, interval=interval, what=what)


def _existing_cluster() -> KubeCluster | None:
    kubeconfig = os.environ.get("KUBECONFIG", "")
    if os.environ.get(USE_KUBECONFIG_ENV) != "1" or not kubeconfig:
        return None
    path = Path(kubeconfig.split(os.pathsep)[0]).expanduser()
    cluster = KubeCluster(kubeconfig=path, server="")
    return KubeCluster(kubeconfig=path, server=str(cluster.configuration().host))


@pytest.fixture(scope="session")
def kube_cluster(request: pytest.FixtureRequest) -> Iterator[KubeCluster]:
    """A Kubernetes API server for the whole session (local, or $KUBECONFIG)."""
    existing = _existing_cluster()
    if existing is not None:
        yield existing
        return
    with LocalCluster(binaries=_binaries(request, with_node=False)) as cluster:
        yield KubeCluster(kubeconfig=cluster.kubeconfig, server=cluster.server, local=cluster)


@pytest.fixture(scope="session")
def kube_node_cluster(request: pytest.FixtureRequest) -> Iterator[KubeCluster]:
    """A cluster whose pods really run: local with one node (root), or $KUBECONFIG."""
    existing = _existing_cluster()
    if existing is not None:
        yield existing
        return
    if os.geteuid() != 0:
        pytest.skip("a local kubelet node needs root (containerd, cgroups, CNI)")
    binaries = _binaries(request, with_node=True)
    with LocalCluster(binaries=binaries, with_node=True) as cluster:
        yield KubeCluster(kubeconfig=cluster.kubeconfig, server=cluster.server, local=cluster)


def _binaries(request: pytest.FixtureRequest, *, with_node: bool) -> Binaries:
    capture = request.config.pluginmanager.getplugin("capturemanager")
    # Show build progress live: a cold build takes long and must not look hung.
    with capture.global_and_fixture_disabled():
        return ensure_binaries(
            with_node=with_node,
            announce=lambda message: print(f"\n{message}", file=sys.stderr, flush=True),
        )


@pytest.fixture
def kube_namespace(request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace for one test, deleted (without waiting) afterwards.

    It is made in ``kube_node_cluster`` if the test uses that, else in
    ``kube_cluster``.
    """
    wanted = "kube_node_cluster" if "kube_node_cluster" in request.fixturenames else "kube_cluster"
    cluster: KubeCluster = request.getfixturevalue(wanted)
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"ts-{stem}-{uuid.uuid4().hex[:6]}"
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        try:
            yield name
        finally:
            core.delete_namespace(name)
