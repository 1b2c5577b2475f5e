"""The TaskScaler spec is read through one table, ``config.SPEC_FIELDS``.

Each row names a field of the spec, the attribute it becomes, and what an
unset one means -- the attribute's dataclass default, so each number is
stated once in Python.  These tests hold the CRD schema to the table (the
same fields, the same defaults, the same required ones) and check that
parsing really takes its defaults from the dataclasses: a number restated
in config.py would survive a changed dataclass default, and fail here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskscale.controller.config import (
    MIN_POLL_INTERVAL_S,
    SPEC_FIELDS,
    RedisRef,
    ScalerConfig,
    SpecField,
    TargetRef,
    config_from_spec,
)
from taskscale.controller.rules.base import Fallback
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.dataclass_defaults import REQUIRED, default_of

CRD = Path(__file__).resolve().parents[2] / "deploy" / "crd" / "taskscaler.yaml"

MINIMAL: dict[str, Any] = {
    "scaleTargetRef": {"name": "w"},
    "redis": {"url": "redis://r:6379/0"},
    "taskTypes": [{"name": "t"}],
    "fallback": {"replicas": 1},
}


def crd_fields() -> dict[str, dict[str, Any]]:
    """Every field of the CRD's spec by path ("taskTypes[].name"), each its
    schema plus ``required`` (listed in its object's ``required``)."""
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    found: dict[str, dict[str, Any]] = {}

    def walk(schema: dict[str, Any], prefix: str) -> None:
        for key, sub in schema["properties"].items():
            path = prefix + key
            if sub.get("type") == "object" and "properties" in sub:
                walk(sub, path + ".")
            elif sub.get("type") == "array" and "properties" in sub["items"]:
                walk(sub["items"], path + "[].")
            else:
                found[path] = {**sub, "required": key in schema.get("required", ())}

    walk(spec, "")
    return found


def objects(config: ScalerConfig) -> dict[type, object]:
    """The object of each owner class a config holds."""
    return {
        ScalerConfig: config,
        ScalingPolicy: config.policy,
        TypePolicy: config.policy.types[0],
        TargetRef: config.target_ref,
        RedisRef: config.redis,
        Fallback: config.fallback,
    }


def test_the_table_has_exactly_the_fields_of_the_crd_spec_in_its_order() -> None:
    assert [f.path for f in SPEC_FIELDS] == list(crd_fields())


@pytest.mark.parametrize("field", SPEC_FIELDS, ids=lambda f: f.path)
def test_each_default_and_required_field_is_the_crds(field: SpecField) -> None:
    schema = crd_fields()[field.path]
    if "default" in schema:
        assert schema["default"] == field.default
        assert isinstance(field.default, type(schema["default"]) | float)
    else:
        assert field.default is None or field.default is REQUIRED
    assert schema["required"] == (field.default is REQUIRED)


def test_each_row_names_an_attribute_of_its_owner() -> None:
    for field in SPEC_FIELDS:
        names = {f.name for f in dataclasses.fields(field.owner)}
        assert field.attr in names, field.path


def test_the_poll_interval_floor_is_the_crds() -> None:
    assert crd_fields()["pollIntervalSeconds"]["minimum"] == MIN_POLL_INTERVAL_S


def test_an_unset_field_becomes_its_default() -> None:
    config = config_from_spec(MINIMAL, name="s", namespace="n")
    held = objects(config)
    for field in SPEC_FIELDS:
        if field.owner in held and field.default not in (None, REQUIRED):
            assert getattr(held[field.owner], field.attr) == field.default, field.path
    assert config.sources == ()  # source: taskscale


def test_a_null_field_counts_as_unset_as_on_the_api_server() -> None:
    spec = {**MINIMAL, "minReplicas": None, "pollIntervalSeconds": None}
    config = config_from_spec(spec, name="s", namespace="n")
    assert config.policy.min_replicas == ScalingPolicy(types=()).min_replicas
    assert config.poll_interval_s == default_of(ScalerConfig, "poll_interval_s")


OWN_DEFAULTS = [
    f
    for f in SPEC_FIELDS
    if f.read is not None
    and f.default not in (None, REQUIRED)
    and default_of(f.owner, f.attr) == f.default
]


def _another(value: Any) -> Any:
    if isinstance(value, str):
        return {"apps/v1": "apps/v2", "Deployment": "StatefulSet"}.get(value, value + "x")
    return value + 1


@pytest.mark.parametrize("field", OWN_DEFAULTS, ids=lambda f: f.path)
def test_the_default_is_read_from_the_dataclass(
    monkeypatch: pytest.MonkeyPatch, field: SpecField
) -> None:
    """Change the dataclass's default: parsing follows (no copy in config.py)."""
    changed = _another(field.default)
    declared = {f.name: f for f in dataclasses.fields(field.owner)}[field.attr]
    monkeypatch.setattr(declared, "default", changed)
    config = config_from_spec(MINIMAL, name="s", namespace="n")
    assert getattr(objects(config)[field.owner], field.attr) == changed


def test_a_set_field_lands_in_its_attribute() -> None:
    numbers = [f for f in OWN_DEFAULTS if isinstance(f.default, int | float)]
    spec = dict(MINIMAL)
    sections: dict[str, dict[str, Any]] = {
        "": spec,
        "taskTypes[]": dict(MINIMAL["taskTypes"][0]),
        "fallback": dict(MINIMAL["fallback"]),
    }
    for field in numbers:
        sections[field.section][field.key] = _another(field.default)
    spec["taskTypes"] = [sections["taskTypes[]"]]
    spec["fallback"] = sections["fallback"]
    held = objects(config_from_spec(spec, name="s", namespace="n"))
    for field in numbers:
        assert getattr(held[field.owner], field.attr) == _another(field.default), field.path
