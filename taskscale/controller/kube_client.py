"""The controller's Kubernetes API client: loading it, installing the CRD,
and calling the API with retries.

:func:`load_api_client` turns a missing or broken kubeconfig into one
:class:`KubeConfigError` sentence (the command line prints it and exits 2)
instead of the client library's traceback. :func:`api_call` retries
transient failures (5xx, 429, connection errors) with tenacity, every failed
attempt counted in ``taskscale_kube_api_errors_total``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from taskscale.controller.metrics import ControllerMetrics
from taskscale.errors import one_line
from taskscale.retrying import RetrySettings, call_with_retries

T = TypeVar("T")

GROUP = "taskscale.io"
VERSION = "v1alpha1"
PLURAL = "taskscalers"
KIND = "TaskScaler"
#: Field manager of every write, so ``managedFields`` says who set replicas.
FIELD_MANAGER = "taskscale-controller"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
#: The marks of a busy pod (controller/disruption.py): the two autoscalers'
#: annotations that keep them from evicting it, and the label the chart's
#: PodDisruptionBudget (maxUnavailable 0) selects, so a drain waits for it too.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
BUSY_LABEL = "taskscale.io/busy"
#: Taints that say a node is about to be removed (its pods will be evicted).
REMOVAL_TAINTS = (
    "ToBeDeletedByClusterAutoscaler",
    "karpenter.sh/disrupted",
    "karpenter.sh/disruption",
)
#: Seconds a single API request may take before it is abandoned (and retried).
REQUEST_TIMEOUT_S = 10.0


class KubeConfigError(Exception):
    """No usable Kubernetes configuration; the message is one sentence."""


def load_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient from ``kubeconfig``, else $KUBECONFIG / ~/.kube/config, else in-cluster.

    Raises :class:`KubeConfigError` saying what was tried when none works.
    """
    configuration = client.Configuration()
    if kubeconfig:
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        except (config.ConfigException, OSError, ValueError) as exc:
            raise KubeConfigError(
                f"cannot use kubeconfig {kubeconfig!r}: {one_line(exc)}"
            ) from None
        return client.ApiClient(configuration)
    try:
        config.load_kube_config(client_configuration=configuration, persist_config=False)  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError, ValueError) as local:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            where = os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise KubeConfigError(
                f"no Kubernetes configuration: {where} is unusable ({one_line(local)}) "
                "and this is not a pod (KUBERNETES_SERVICE_HOST unset); "
                "pass --kubeconfig or set KUBECONFIG"
            ) from None
    return client.ApiClient(configuration)


def install_crd(
    api: client.ApiClient, manifest: Mapping[str, Any], *, timeout: float = 60.0
) -> None:
    """Create or update a CRD (deploy/crd/taskscaler.yaml, parsed) and wait until
    its resources are served.  For tests, benchmarks and clusters without Helm."""
    crd: Any = client.V1CustomResourceDefinition.from_dict(dict(manifest))
    ext = client.ApiextensionsV1Api(api)
    name = str(manifest["metadata"]["name"])
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as exc:
        if exc.status != 409:
            raise
        current: Any = ext.read_custom_resource_definition(name)
        crd.metadata.resource_version = current.metadata.resource_version
        ext.replace_custom_resource_definition(name, crd)
    deadline = time.monotonic() + timeout
    while not _crd_established(ext, name):
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} not established after {timeout:.0f} s")
        time.sleep(0.2)


def _crd_established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    crd: Any = ext.read_custom_resource_definition(name)
    conditions = crd.status.conditions if crd.status else None
    return any(c.type == "Established" and c.status == "True" for c in conditions or [])


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: server overload or failure, or the connection broke."""
    if isinstance(exc, ApiException):
        return exc.status in (None, 0, 429, 500, 502, 503, 504)
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError)


def api_call(
    fn: Callable[[], T],
    *,
    operation: str,
    metrics: ControllerMetrics,
    retry: RetrySettings,
    scaler: str | None = None,
) -> T:
    """Call the API with retries; every failed attempt is counted under
    ``operation`` (and the ``namespace/name`` of the scaler it was made for)."""
    return call_with_retries(
        fn,
        settings=retry,
        retry_if=is_transient,
        on_error=lambda exc: metrics.count_api_error(operation, scaler),
    )


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of a Kubernetes API error; None for any other exception."""
    return exc.status if isinstance(exc, ApiException) else None


def utc_now() -> datetime:
    """Now, timezone-aware in UTC (what metav1.Time fields take)."""
    return datetime.now(UTC)


def rfc3339(when: datetime | float) -> str:
    """Second-precision RFC 3339 in UTC, as metav1.Time serializes."""
    if not isinstance(when, datetime):
        when = datetime.fromtimestamp(when, UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
