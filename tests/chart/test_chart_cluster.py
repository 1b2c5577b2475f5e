"""The chart against a real API server: accepted, installable, least privilege.

* every ``ci/*-values.yaml`` renders to objects the API server accepts
  (server-side dry run: admission, schema and CEL validation included);
* ``helm install`` then ``helm upgrade`` of the chart with its examples works,
  the CRD is established and the example TaskScaler is created by its hook;
* the controller's ServiceAccount may do exactly what the controller needs
  and is refused the rest (SubjectAccessReview, and real calls with the
  ServiceAccount's own token).

The Prometheus Operator's CRDs are not part of the test cluster; minimal
stand-ins (any spec accepted) let the API server take the ServiceMonitor and
PrometheusRule objects, so for those two only the envelope is checked.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.chart import (
    CHART,
    CI_VALUES,
    CRD_NAME,
    adopt_crd_if_present,
    ensure_taskscaler_crd,
    helm,
    kubectl,
    render,
    service_account_token,
)
from support.kube_cluster import KubeCluster, wait_for

pytestmark = pytest.mark.kube

MONITORING_STANDINS = Path(__file__).with_name("monitoring-crds.yaml")


@pytest.fixture(scope="module")
def crds(kube_cluster: KubeCluster) -> None:
    """The TaskScaler CRD and the monitoring stand-ins, established."""
    kubectl(
        kube_cluster, "apply", "--server-side", "--force-conflicts", "-f", str(MONITORING_STANDINS)
    )
    ensure_taskscaler_crd(kube_cluster)
    for name in ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"):
        kubectl(kube_cluster, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")


def _crd_exists(cluster: KubeCluster) -> bool:
    with cluster.api_client() as api:
        try:
            client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
    return True


def _ensure_namespaces(cluster: KubeCluster, objects: list[dict[str, Any]]) -> None:
    wanted = {o["metadata"].get("namespace") for o in objects} - {None}
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        existing = {n.metadata.name for n in core.list_namespace().items if n.metadata}
        for name in sorted(wanted - existing):
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_ci_values_render_objects_the_api_server_accepts(
    kube_cluster: KubeCluster, kube_namespace: str, crds: None, values: Path
) -> None:
    objects = render(values_files=[values], namespace=kube_namespace, release="dry")
    _ensure_namespaces(kube_cluster, objects)
    out = kubectl(
        kube_cluster,
        "apply",
        "--dry-run=server",
        "--server-side",
        "--force-conflicts",
        "--field-manager=taskscale-chart-test",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objects),
    )
    applied = [line for line in out.splitlines() if "(server dry run)" in line]
    assert len(applied) == len(objects), out


def test_api_server_rejects_an_invalid_taskscaler_from_the_chart_crd(
    kube_cluster: KubeCluster, kube_namespace: str, crds: None
) -> None:
    bad = {
        "apiVersion": "taskscale.io/v1alpha1",
        "kind": "TaskScaler",
        "metadata": {"name": "bad", "namespace": kube_namespace},
        "spec": {
            "scaleTargetRef": {"name": "w"},
            "redis": {"url": "redis://r:6379/0"},
            "taskTypes": [{"name": "a"}],
            "minReplicas": 5,
            "maxReplicas": 2,
        },
    }
    with kube_cluster.api_client() as api, pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "taskscale.io", "v1alpha1", kube_namespace, "taskscalers", bad
        )
    assert caught.value.status == 422
    assert "maxReplicas must be at least minReplicas" in str(caught.value.body)


# --- helm install / upgrade ----------------------------------------------------


def test_helm_install_and_upgrade_with_examples(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    release = f"it-{uuid.uuid4().hex[:6]}"
    with kube_cluster.api_client() as api:
        adopt_crd_if_present(api, release, kube_namespace)
    env = {"KUBECONFIG": str(kube_cluster.kubeconfig)}
    common = [
        "--namespace",
        kube_namespace,
        "--set",
        "examples.enabled=true",
        "--set",
        "examples.redis.enabled=false",
        "--set",
        "examples.redisUrl=redis://redis.invalid:6379/0",
    ]
    try:
        helm("install", release, CHART, *common, env=env)
        with kube_cluster.api_client() as api:
            custom = client.CustomObjectsApi(api)
            scaler: Any = custom.get_namespaced_custom_object(
                "taskscale.io",
                "v1alpha1",
                kube_namespace,
                "taskscalers",
                f"{release}-taskscale-example-worker",
            )
            assert scaler["spec"]["redis"]["url"] == "redis://redis.invalid:6379/0"
            assert scaler["spec"]["tasksPerReplica"] == 4
            apps = client.AppsV1Api(api)
            worker = apps.read_namespaced_deployment(
                f"{release}-taskscale-example-worker", kube_namespace
            )
            assert worker.spec.replicas == 0
            # The scheduler is part of every install (on by default, 2 replicas),
            # on the examples' Redis: without it delayed tasks and retries stall.
            scheduler = apps.read_namespaced_deployment(
                f"{release}-taskscale-scheduler", kube_namespace
            )
            assert scheduler.spec.replicas == 2
            [container] = scheduler.spec.template.spec.containers
            assert container.command == ["taskscale", "scheduler"]
            scheduler_env = {e.name: e.value for e in container.env}
            assert scheduler_env["TASKSCALE_REDIS_URL"] == "redis://redis.invalid:6379/0"
            # The autoscaler's change survives an upgrade (three-way merge).
            apps.patch_namespaced_deployment_scale(
                f"{release}-taskscale-example-worker", kube_namespace, {"spec": {"replicas": 2}}
            )

        helm(
            "upgrade",
            release,
            CHART,
            *common,
            "--set",
            "examples.taskScaler.tasksPerReplica=8",
            env=env,
        )
        status = helm("status", release, "--namespace", kube_namespace, "-o", "json", env=env)
        assert '"version":2' in status.stdout.replace(" ", "")
        with kube_cluster.api_client() as api:
            scaler = client.CustomObjectsApi(api).get_namespaced_custom_object(
                "taskscale.io",
                "v1alpha1",
                kube_namespace,
                "taskscalers",
                f"{release}-taskscale-example-worker",
            )
            assert scaler["spec"]["tasksPerReplica"] == 8
            worker = client.AppsV1Api(api).read_namespaced_deployment(
                f"{release}-taskscale-example-worker", kube_namespace
            )
            assert worker.spec.replicas == 2
            scheduler = client.AppsV1Api(api).read_namespaced_deployment(
                f"{release}-taskscale-scheduler", kube_namespace
            )
            assert scheduler.spec.replicas == 2
            crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
            assert crd.metadata is not None and crd.metadata.annotations is not None
            assert crd.metadata.annotations["meta.helm.sh/release-name"] == release
    finally:
        helm("uninstall", release, "--namespace", kube_namespace, env=env, check=False)
    # crds.keep: the CRD (and every TaskScaler in the cluster) outlives the release.
    assert _crd_exists(kube_cluster)


# --- RBAC ------------------------------------------------------------------------


@pytest.fixture
def controller_rbac(kube_cluster: KubeCluster, kube_namespace: str) -> Iterator[str]:
    """The chart's ServiceAccount and RBAC objects, really applied; yields the SA name."""
    release = f"rb-{uuid.uuid4().hex[:6]}"
    objects = [
        o
        for o in render(namespace=kube_namespace, release=release)
        if o["kind"]
        in {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    ]
    assert {o["kind"] for o in objects} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    }
    manifest = yaml.safe_dump_all(objects)
    kubectl(kube_cluster, "apply", "-f", "-", stdin=manifest)
    try:
        yield f"{release}-taskscale"
    finally:
        kubectl(
            kube_cluster, "delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=manifest
        )


def _allowed(
    cluster: KubeCluster,
    user: str,
    namespace: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    name: str | None = None,
) -> bool:
    sa_namespace = user.split(":")[2]
    subresource = ""
    if "/" in resource:
        resource, subresource = resource.split("/", 1)
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user,
            groups=["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}"],
            resource_attributes=client.V1ResourceAttributes(
                namespace=namespace,
                verb=verb,
                group=group,
                resource=resource,
                subresource=subresource,
                name=name,
            ),
        )
    )
    with cluster.api_client() as api:
        result = client.AuthorizationV1Api(api).create_subject_access_review(review)
    assert result.status is not None
    return bool(result.status.allowed)


NEEDED = [
    ("get", "taskscalers", "taskscale.io", None),
    ("list", "taskscalers", "taskscale.io", None),
    ("watch", "taskscalers", "taskscale.io", None),
    ("patch", "taskscalers/status", "taskscale.io", None),
    ("get", "deployments/scale", "apps", None),
    ("patch", "deployments/scale", "apps", None),
    ("get", "deployments/status", "apps", None),  # the rollout hold
    ("get", "pods", "", None),
    ("list", "pods", "", None),
    ("patch", "pods", "", None),
    ("create", "events", "", None),
    ("get", "secrets", "", None),
    # Job mode (spec.jobTemplate): one Job per task, finished ones deleted
    ("list", "jobs", "batch", None),
    ("create", "jobs", "batch", None),
    ("delete", "jobs", "batch", None),
]
REFUSED = [
    ("create", "taskscalers", "taskscale.io"),
    ("update", "taskscalers", "taskscale.io"),
    ("delete", "taskscalers", "taskscale.io"),
    ("patch", "deployments", "apps"),
    ("patch", "deployments/status", "apps"),
    ("update", "deployments", "apps"),
    ("delete", "deployments", "apps"),
    ("create", "deployments", "apps"),
    ("delete", "pods", ""),
    ("create", "pods", ""),
    ("create", "pods/exec", ""),
    ("list", "secrets", ""),
    ("watch", "secrets", ""),
    ("get", "configmaps", ""),
    ("delete", "events", ""),
    ("patch", "replicasets/scale", "apps"),
    ("patch", "statefulsets/scale", "apps"),
    ("create", "rolebindings", "rbac.authorization.k8s.io"),
    ("patch", "jobs", "batch"),
    ("update", "jobs", "batch"),
    ("create", "cronjobs", "batch"),
]


def test_controller_service_account_can_do_what_the_controller_needs(
    kube_cluster: KubeCluster, kube_namespace: str, controller_rbac: str
) -> None:
    user = f"system:serviceaccount:{kube_namespace}:{controller_rbac}"
    for namespace in (kube_namespace, "some-other-namespace"):
        for verb, resource, group, name in NEEDED:
            assert _allowed(
                kube_cluster, user, namespace, verb, resource, group=group, name=name
            ), f"{verb} {resource} in {namespace} refused"
    for verb in ("get", "list", "watch"):  # cluster-scoped: which nodes drain (issue 23)
        assert _allowed(kube_cluster, user, "", verb, "nodes"), f"{verb} nodes refused"
    lease = ("coordination.k8s.io", "leases")
    assert _allowed(kube_cluster, user, kube_namespace, "create", lease[1], group=lease[0])
    for verb in ("get", "update"):
        assert _allowed(
            kube_cluster,
            user,
            kube_namespace,
            verb,
            lease[1],
            group=lease[0],
            name="taskscale-controller",
        )


def test_controller_service_account_is_refused_everything_else(
    kube_cluster: KubeCluster, kube_namespace: str, controller_rbac: str
) -> None:
    user = f"system:serviceaccount:{kube_namespace}:{controller_rbac}"
    for verb, resource, group in REFUSED:
        assert not _allowed(kube_cluster, user, kube_namespace, verb, resource, group=group), (
            f"{verb} {group}/{resource} allowed"
        )
    leases = ("coordination.k8s.io", "leases")
    # Leases: only its own, only in the release namespace.
    assert not _allowed(
        kube_cluster,
        user,
        kube_namespace,
        "update",
        leases[1],
        group=leases[0],
        name="kube-scheduler",
    )
    assert not _allowed(
        kube_cluster,
        user,
        "kube-system",
        "get",
        leases[1],
        group=leases[0],
        name="taskscale-controller",
    )
    assert not _allowed(kube_cluster, user, "", "list", "namespaces")
    # Nodes are read (drains, issue 23), never written
    for verb in ("patch", "update", "delete"):
        assert not _allowed(kube_cluster, user, "", verb, "nodes"), f"{verb} nodes allowed"


def test_service_account_token_really_scales_but_cannot_edit_the_deployment(
    kube_cluster: KubeCluster, kube_namespace: str, controller_rbac: str
) -> None:
    labels = {"app": "rbac-probe"}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="probe"),
        spec=client.V1DeploymentSpec(
            replicas=0,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="w", image="registry.invalid/none:0")]
                ),
            ),
        ),
    )
    with kube_cluster.api_client() as api:
        client.AppsV1Api(api).create_namespaced_deployment(kube_namespace, deployment)
        token = service_account_token(api, controller_rbac, kube_namespace, seconds=600)
    with kube_cluster.token_client(token) as api:
        apps = client.AppsV1Api(api)
        # RBAC changes reach the authorizer's cache within moments.
        wait_for(
            lambda: _try(
                lambda: apps.patch_namespaced_deployment_scale(
                    "probe", kube_namespace, {"spec": {"replicas": 3}}
                )
            ),
            timeout=30,
            what="the controller's ServiceAccount to patch deployments/scale",
        )
        scale = apps.read_namespaced_deployment_scale("probe", kube_namespace)
        assert scale.spec is not None and scale.spec.replicas == 3
        with pytest.raises(ApiException) as caught:
            apps.patch_namespaced_deployment(
                "probe", kube_namespace, {"metadata": {"labels": {"edited": "yes"}}}
            )
        assert caught.value.status == 403
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(api).list_namespaced_secret(kube_namespace)
        assert caught.value.status == 403


def _try(call: Any) -> bool:
    try:
        call()
    except ApiException as exc:
        if exc.status == 403:
            return False
        raise
    return True
