"""Shared helpers of the tests on a real API server: the CRD, a Deployment
whose pods never run (no kubelet), TaskScaler objects, their conditions and
Events, and the server-side table ``kubectl get`` prints.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.controller import CRD
from support.kube_cluster import wait_for
from taskscale.controller import kube
from taskscale.controller.kube import GROUP, PLURAL, VERSION, ControllerSettings
from taskscale.controller.reconciler import ReconcilerSettings, RetrySettings

LABELS = {"app": "worker"}


def install_crd(api: client.ApiClient) -> None:
    """Create or update the TaskScaler CRD and wait until it is served."""
    kube.install_crd(api, yaml.safe_load(CRD.read_text()))
    custom = client.CustomObjectsApi(api)
    wait_for(lambda: _served(custom), timeout=60, what="taskscalers to be served")


def _served(custom: client.CustomObjectsApi) -> bool:
    try:
        custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    except ApiException:
        return False
    return True


def controller_settings(namespace: str) -> ControllerSettings:
    """The test controller's settings: watch ``namespace`` only, short retries."""
    return ControllerSettings(
        watch_namespace=namespace,
        api_retry=RetrySettings(attempts=3, initial_s=0.05, max_s=0.2),
        reconciler=ReconcilerSettings(
            redis=RetrySettings(attempts=2, initial_s=0.01, max_s=0.05),
            redis_timeout_s=0.5,
            error_backoff_initial_s=0.2,
            error_backoff_max_s=1.0,
        ),
    )


def deployment(name: str, replicas: int) -> client.V1Deployment:
    labels = {**LABELS, "deployment": name}
    container = client.V1Container(name="worker", image="registry.invalid/taskscale/none:0")
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container]),
            ),
        ),
    )


def taskscaler(name: str, target: str, redis_url: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scaleTargetRef": {"name": target},
        "redis": {"url": redis_url},
        "taskTypes": [{"name": "email", "idleThresholdSeconds": 3}],
        "tasksPerReplica": 1,  # one replica per task: the counts in the tests read directly
        "minReplicas": 0,
        "maxReplicas": 5,
        "scaleDownStabilizationSeconds": 0,
        "pollIntervalSeconds": 0.3,
    }
    body.update(spec)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TaskScaler",
        "metadata": {"name": name},
        "spec": body,
    }


def create_scaler(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    result: Any = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return dict(result)


def get_scaler(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    result: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return dict(result)


def replicas(api: client.ApiClient, namespace: str, name: str) -> int:
    scale: Any = client.AppsV1Api(api).read_namespaced_deployment_scale(name, namespace)
    return int(scale.spec.replicas or 0)


def live_pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[str]:
    pods: list[Any] = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [str(p.metadata.name) for p in pods if p.metadata.deletion_timestamp is None]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


def events(api: client.ApiClient, namespace: str, name: str) -> list[client.CoreV1Event]:
    items = client.CoreV1Api(api).list_namespaced_event(namespace).items
    return [e for e in items if e.involved_object.name == name]


def event_reasons(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    return [str(e.reason) for e in events(api, namespace, name)]


def as_table(api: client.ApiClient, path: str) -> dict[str, Any]:
    """GET ``path`` the way kubectl does (server-side printing)."""
    configuration = api.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    request = urllib.request.Request(
        configuration.host + path.replace("/tsc/", f"/{PLURAL}/"),
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    token = (configuration.api_key or {}).get("authorization") or (configuration.api_key or {}).get(
        "BearerToken"
    )
    if token:
        request.add_header("Authorization", token)
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        table: dict[str, Any] = json.loads(response.read())
    return table
