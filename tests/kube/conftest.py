"""Fixtures of the controller tests on a real API server: an admin client
with the CRD installed, the Redis key namespace, and the controller itself
running in the test process and watching only the test's namespace."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from e2e.cluster.images import write_oci_image
from support.kube import controller_settings, install_crd
from support.kube_cluster import KubeCluster
from taskscale.controller.kube import KubeController
from taskscale.controller.metrics import ControllerMetrics


@pytest.fixture(scope="module")
def api(kube_cluster: KubeCluster) -> Iterator[client.ApiClient]:
    with kube_cluster.api_client() as api_client:
        install_crd(api_client)
        yield api_client


@pytest.fixture
def controller(api: client.ApiClient, kube_namespace: str) -> Iterator[KubeController]:
    """The controller, in this process, watching only the test's namespace."""
    settings = controller_settings(kube_namespace)
    ctl = KubeController(api, metrics=ControllerMetrics(), identity="test", settings=settings)
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture
def node(api: client.ApiClient) -> Iterator[str]:
    """A Node object (no kubelet behind it) for a test's pods."""
    name = f"ts-node-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_node(name)


#: The one-file image (static busybox) the real-pod tests run.
BUSYBOX_IMAGE = "taskscale-test/busybox:1"


@pytest.fixture(scope="module")
def busybox_image(kube_node_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A one-file image (static busybox) imported into the local node; the
    tests of real pods run their commands (or the host's Python) with it."""
    node = kube_node_cluster.local.node if kube_node_cluster.local else None
    if node is None:
        pytest.skip("needs the local node to import an image (not an existing cluster)")
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox not found (Debian package busybox-static)")
    archive = write_oci_image(
        {"/bin/busybox": Path(busybox)},
        name=BUSYBOX_IMAGE,
        entrypoint=["/bin/busybox"],
        out=tmp_path_factory.mktemp("image") / "busybox.tar",
    )
    node.import_image(archive)
    return BUSYBOX_IMAGE
