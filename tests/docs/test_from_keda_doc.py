"""docs/from-keda.md cannot rot: its TaskScaler examples are read by the
controller's own parser, every field they set is one the CRD declares (the
parser alone would ignore a misspelt or renamed field), and they say what the
KEDA example beside them says, field by field.

The list-source variant uses the fields of the observer-sources change
(``source``, ``queues``, ``tasks``): while the CRD does not declare them,
exactly those are left out of the schema check; once it does, they are
checked like the rest.
"""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import urlsplit

import yaml

from support.controller import CRD
from support.docs import FROM_KEDA, REPO, from_keda_blocks, one
from taskscale.controller.config import TargetRef, config_from_object
from taskscale.controller.rules.base import Fallback
from taskscale.redis_urls import check_url

SOURCE_FIELDS = ("source", "queues", "tasks")


def spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(schema["properties"]["spec"])


def undeclared(value: object, schema: dict[str, Any], path: str) -> list[str]:
    """Paths of ``value`` that ``schema`` (an OpenAPI v3 schema) does not declare."""
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        out = []
        for key, item in value.items():
            if key in props:
                out += undeclared(item, props[key], f"{path}.{key}")
            else:
                out.append(f"{path}.{key}")
        return out
    if isinstance(value, list) and "items" in schema:
        return [
            bad
            for i, item in enumerate(value)
            for bad in undeclared(item, schema["items"], f"{path}[{i}]")
        ]
    return []


def without_source_fields(scaler: dict[str, Any]) -> dict[str, Any]:
    """``scaler`` minus the observer-sources fields (spec.source, a type's queues/tasks)."""
    stripped = copy.deepcopy(scaler)
    stripped["spec"].pop("source", None)
    for entry in stripped["spec"]["taskTypes"]:
        entry.pop("queues", None)
        entry.pop("tasks", None)
    return stripped


def test_the_page_has_the_keda_example_and_both_taskscaler_examples() -> None:
    assert set(from_keda_blocks()) == {"keda", "taskscaler", "taskscaler-list-source"}


def test_the_taskscaler_example_is_read_by_the_controllers_parser() -> None:
    scaler = one(from_keda_blocks()["taskscaler"], "TaskScaler")
    config = config_from_object(scaler)
    assert (config.namespace, config.name, config.target) == (
        "jobs",
        "email-worker",
        "email-worker",
    )
    assert config.target_ref == TargetRef()  # apps/v1 Deployment, KEDA's default too
    assert (config.redis.secret_name, config.redis.secret_key) == ("jobs-redis", "url")


def test_every_field_of_the_taskscaler_example_is_declared_by_the_crd() -> None:
    scaler = one(from_keda_blocks()["taskscaler"], "TaskScaler")
    assert undeclared(scaler["spec"], spec_schema(), "spec") == []


def test_the_taskscaler_example_says_what_the_keda_example_says() -> None:
    keda, ours = from_keda_blocks()["keda"], from_keda_blocks()["taskscaler"]
    scaled = one(keda, "ScaledObject")["spec"]
    (trigger,) = scaled["triggers"]
    meta = trigger["metadata"]
    config = config_from_object(one(ours, "TaskScaler"))
    policy = config.policy

    assert trigger["type"] == "redis"
    assert config.target == scaled["scaleTargetRef"]["name"]
    assert (policy.min_replicas, policy.max_replicas) == (
        scaled["minReplicaCount"],
        scaled["maxReplicaCount"],
    )
    assert policy.tasks_per_replica == int(meta["listLength"])
    assert [t.name for t in policy.types] == [meta["listName"]]
    assert policy.types[0].idle_threshold_s == scaled["cooldownPeriod"]
    assert config.poll_interval_s <= scaled["pollingInterval"]
    assert config.fallback == Fallback(
        replicas=scaled["fallback"]["replicas"],
        after_failures=scaled["fallback"]["failureThreshold"],
    )

    # address + databaseIndex + the TriggerAuthentication's password = the URL
    auth = one(keda, "TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    (ref,) = auth["spec"]["secretTargetRef"]
    assert ref["parameter"] == "password"
    keda_secret = one(keda, "Secret")
    assert keda_secret["metadata"]["name"] == ref["name"]
    url_secret = one(ours, "Secret")
    assert url_secret["metadata"]["name"] == config.redis.secret_name
    url = url_secret["stringData"][config.redis.secret_key]
    check_url(url)
    parts = urlsplit(url)
    assert parts.scheme == "redis"  # no enableTLS in the KEDA trigger
    assert f"{parts.hostname}:{parts.port}" == meta["address"]
    assert parts.path == "/" + meta["databaseIndex"]
    assert parts.password == keda_secret["stringData"][ref["key"]]


def test_the_list_source_variant_differs_only_by_the_source_fields() -> None:
    plain = one(from_keda_blocks()["taskscaler"], "TaskScaler")
    variant = one(from_keda_blocks()["taskscaler-list-source"], "TaskScaler")
    # and by the queue-wait target: a plain list's entries carry no enqueue time
    for entry in plain["spec"]["taskTypes"]:
        assert entry.pop("maxQueueWaitSeconds")
    assert without_source_fields(variant) == plain
    meta = one(from_keda_blocks()["keda"], "ScaledObject")["spec"]["triggers"][0]["metadata"]
    (entry,) = variant["spec"]["taskTypes"]
    assert variant["spec"]["source"] == "list"
    assert entry["queues"] == [meta["listName"]]
    assert entry["tasks"] == [entry["name"]]


def test_the_list_source_variant_is_declared_by_the_crd_and_parsed_as_a_list_source() -> None:
    variant = one(from_keda_blocks()["taskscaler-list-source"], "TaskScaler")
    assert undeclared(variant["spec"], spec_schema(), "spec") == []
    config = config_from_object(variant)
    assert [t.name for t in config.policy.types] == ["emails"]
    (source,) = config.sources  # the parser reads the KEDA list as a list source of the type
    assert (source.task_type, source.kind, source.queues, source.tasks) == (
        "emails",
        "list",
        ("emails",),
        ("emails",),
    )


def test_every_test_the_page_names_exists() -> None:
    """``path::name`` references, and ``::name`` for another test of the same file."""
    named: list[tuple[str, str]] = []
    path = ""
    for ref_path, name in re.findall(r"`(tests/[\w/]+\.py)?::(\w+)`", FROM_KEDA.read_text()):
        path = ref_path or path
        assert path, f"::{name} names no file"
        named.append((path, name))
    assert len(named) >= 15
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not re.search(rf"^def {name}\(", (REPO / path).read_text(), re.M)
    ]
    assert missing == []
