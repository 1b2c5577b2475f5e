"""The test cluster is a real Kubernetes: controllers reconcile, RBAC is enforced.

These are the two properties the controller's integration tests rely on: a
write to a Deployment's ``scale`` subresource really drives its ReplicaSet and
Pods, and a ServiceAccount gets exactly what its Role grants. Both would be
false against a mock or a bare API server without a controller-manager.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.kube_cluster import KubeCluster, wait_for

pytestmark = pytest.mark.kube

LABELS = {"app": "scale-probe"}


def _deployment(name: str, replicas: int) -> client.V1Deployment:
    # No node runs these pods, so the image is never pulled; the name only
    # has to be valid.
    container = client.V1Container(name="worker", image="registry.invalid/taskscale/none:0")
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name, labels=LABELS),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=LABELS),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=LABELS),
                spec=client.V1PodSpec(containers=[container]),
            ),
        ),
    )


def _live_pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(namespace, label_selector="app=scale-probe").items
    return [p for p in pods if p.metadata is not None and p.metadata.deletion_timestamp is None]


def _owner_kinds(pod: client.V1Pod) -> set[str]:
    assert pod.metadata is not None
    return {ref.kind for ref in pod.metadata.owner_references or []}


def test_scale_subresource_drives_replicaset_and_pods(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    with kube_cluster.api_client() as api:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_deployment(kube_namespace, _deployment("probe", replicas=3))

        def three_pods() -> list[client.V1Pod] | None:
            pods = _live_pods(core, kube_namespace)
            return pods if len(pods) == 3 else None

        pods = wait_for(three_pods, timeout=60, what="3 pods from the controller-manager")
        assert all(_owner_kinds(pod) == {"ReplicaSet"} for pod in pods)

        apps.patch_namespaced_deployment_scale("probe", kube_namespace, {"spec": {"replicas": 1}})

        def replica_set_replicas() -> list[int | None]:
            sets = apps.list_namespaced_replica_set(kube_namespace).items
            return [rs.spec.replicas if rs.spec else None for rs in sets]

        # Scaling does not roll out: the one ReplicaSet is resized in place.
        wait_for(lambda: replica_set_replicas() == [1], timeout=60, what="ReplicaSet at 1")
        wait_for(
            lambda: len(_live_pods(core, kube_namespace)) == 1, timeout=60, what="pods down to 1"
        )
        scale = apps.read_namespaced_deployment_scale("probe", kube_namespace)
        assert scale.spec is not None and scale.spec.replicas == 1


def _status(call: Any, *args: Any) -> int:
    """HTTP status of an API call: 200 if it succeeded, else the error's."""
    try:
        call(*args)
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_service_account_gets_only_what_its_role_grants(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    other_namespace = f"{kube_namespace}-other"
    with kube_cluster.api_client() as api:
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=other_namespace))
        )
        try:
            core.create_namespaced_service_account(
                kube_namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="reader"))
            )
            rbac.create_namespaced_role(
                kube_namespace,
                client.V1Role(
                    metadata=client.V1ObjectMeta(name="pod-reader"),
                    rules=[
                        client.V1PolicyRule(
                            api_groups=[""], resources=["pods"], verbs=["get", "list"]
                        )
                    ],
                ),
            )
            rbac.create_namespaced_role_binding(
                kube_namespace,
                client.V1RoleBinding(
                    metadata=client.V1ObjectMeta(name="reader-reads-pods"),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"
                    ),
                    subjects=[
                        client.RbacV1Subject(
                            kind="ServiceAccount", name="reader", namespace=kube_namespace
                        )
                    ],
                ),
            )
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
            )
            status = core.create_namespaced_service_account_token(
                "reader", kube_namespace, request
            ).status
            assert status is not None and status.token
            token: str = status.token

            with kube_cluster.token_client(token) as sa_api:
                sa_core, sa_apps = client.CoreV1Api(sa_api), client.AppsV1Api(sa_api)
                # The authorizer's cache sees the new binding within moments.
                wait_for(
                    lambda: _status(sa_core.list_namespaced_pod, kube_namespace) == 200,
                    timeout=30,
                    what="the Role to take effect",
                )
                assert _status(sa_core.list_namespaced_pod, other_namespace) == 403
                assert _status(sa_apps.list_namespaced_deployment, kube_namespace) == 403
                assert _status(sa_core.list_namespaced_secret, kube_namespace) == 403
                assert _status(sa_core.delete_collection_namespaced_pod, kube_namespace) == 403

            with kube_cluster.token_client(token + "tampered") as bad_api:
                assert _status(client.CoreV1Api(bad_api).list_namespaced_pod, kube_namespace) == 401
        finally:
            core.delete_namespace(other_namespace)
