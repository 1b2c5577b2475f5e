"""Fixtures of the controller tests on a real API server: an admin client
with the CRD installed, the Redis key namespace, and the controller itself
running in the test process and watching only the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kube_fixture import KubeCluster
from kubehelpers import install_crd
from kubernetes import client

from taskscale.controller.kube import ControllerSettings, KubeController
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import ReconcilerSettings, RetrySettings
from taskscale.keys import Keys


@pytest.fixture(scope="module")
def api(kube_cluster: KubeCluster) -> Iterator[client.ApiClient]:
    with kube_cluster.api_client() as api_client:
        install_crd(api_client)
        yield api_client


@pytest.fixture
def keys() -> Keys:
    return Keys("taskscale")


@pytest.fixture
def controller(api: client.ApiClient, kube_namespace: str) -> Iterator[KubeController]:
    """The controller, in this process, watching only the test's namespace."""
    settings = ControllerSettings(
        watch_namespace=kube_namespace,
        api_retry=RetrySettings(attempts=3, initial_s=0.05, max_s=0.2),
        reconciler=ReconcilerSettings(
            redis=RetrySettings(attempts=2, initial_s=0.01, max_s=0.05),
            redis_timeout_s=0.5,
            error_backoff_initial_s=0.2,
            error_backoff_max_s=1.0,
        ),
    )
    ctl = KubeController(api, metrics=ControllerMetrics(), identity="test", settings=settings)
    ctl.start()
    yield ctl
    ctl.stop()
