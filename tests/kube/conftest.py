"""Fixtures of the controller tests on a real API server: an admin client
with the CRD installed, the Redis key namespace, and the controller itself
running in the test process and watching only the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

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
