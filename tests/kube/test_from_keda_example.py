"""docs/from-keda.md's TaskScaler example on a real API server: created with
strict field validation (a misspelt or unknown field is an error there, not
silently pruned), it passes the CRD's schema and rules, and what the server
stores is what the controller reads.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.docs import from_keda_blocks, one
from taskscale.controller.config import config_from_object
from taskscale.controller.kube import GROUP, PLURAL, VERSION

pytestmark = [pytest.mark.kube]


def create_strict(api: client.ApiClient, namespace: str, scaler: dict[str, Any]) -> Any:
    scaler["metadata"]["namespace"] = namespace
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, scaler, field_validation="Strict"
    )


def test_the_example_is_accepted_as_written_and_read_back_unchanged(
    api: client.ApiClient, kube_namespace: str
) -> None:
    docs = from_keda_blocks()["taskscaler"]
    secret, scaler = one(docs, "Secret"), one(docs, "TaskScaler")
    secret["metadata"]["namespace"] = kube_namespace
    client.CoreV1Api(api).create_namespaced_secret(
        kube_namespace, secret, field_validation="Strict"
    )
    stored = create_strict(api, kube_namespace, scaler)
    ours, theirs = config_from_object(scaler), config_from_object(stored)
    assert theirs.policy == ours.policy
    assert (theirs.target, theirs.target_ref, theirs.redis, theirs.fallback) == (
        ours.target,
        ours.target_ref,
        ours.redis,
        ours.fallback,
    )


def test_a_misspelt_field_in_the_example_would_be_refused(
    api: client.ApiClient, kube_namespace: str
) -> None:
    scaler = one(from_keda_blocks()["taskscaler"], "TaskScaler")
    scaler["spec"]["maxReplicaCount"] = scaler["spec"].pop("maxReplicas")  # KEDA's spelling
    with pytest.raises(ApiException) as refused:
        create_strict(api, kube_namespace, scaler)
    assert refused.value.status in (400, 422)
    assert "maxReplicaCount" in str(refused.value.body)


def test_the_list_source_variant_is_accepted_as_written_and_read_back_as_a_list_source(
    api: client.ApiClient, kube_namespace: str
) -> None:
    variant = one(from_keda_blocks()["taskscaler-list-source"], "TaskScaler")
    stored = create_strict(api, kube_namespace, copy.deepcopy(variant))
    assert stored["spec"]["source"] == "list"
    assert [t["name"] for t in stored["spec"]["taskTypes"]] == ["emails"]
    ours, theirs = config_from_object(variant), config_from_object(stored)
    assert theirs.policy == ours.policy
    assert theirs.sources == ours.sources
    assert [(s.kind, s.queues) for s in theirs.sources] == [("list", ("emails",))]
