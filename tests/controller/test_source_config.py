"""A TaskScaler's ``source``, per-type override, ``queues`` and ``tasks`` become
the config's type sources; the default (taskscale) adds none; a spec the
sources can't apply is refused naming the field.  The CRD agrees."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from support.controller import CRD, scaler_object
from taskscale.controller.config import InvalidSpec, config_from_object
from taskscale.controller.source_spec import SOURCE_KINDS, TypeSource


def test_without_source_every_type_is_taskscales_own() -> None:
    assert config_from_object(scaler_object()).sources == ()
    assert config_from_object(scaler_object(source="taskscale")).sources == ()


def test_scaler_source_applies_to_each_type_with_name_defaults() -> None:
    config = config_from_object(
        scaler_object(source="celery", taskTypes=[{"name": "email"}, {"name": "report"}])
    )
    assert config.sources == (
        TypeSource("email", "celery", ("email",), ("email",)),
        TypeSource("report", "celery", ("report",), ("report",)),
    )


def test_a_type_overrides_the_source_and_names_its_queues_and_tasks() -> None:
    config = config_from_object(
        scaler_object(
            source="rq",
            taskTypes=[
                {"name": "email", "queues": ["high", "low"], "tasks": ["app.send", "app.bounce"]},
                {"name": "native", "source": "taskscale"},
                {"name": "legacy", "source": "list", "queues": ["jobs:legacy"]},
            ],
        )
    )
    assert config.sources == (
        TypeSource("email", "rq", ("high", "low"), ("app.send", "app.bounce")),
        TypeSource("legacy", "list", ("jobs:legacy",), ("legacy",)),
    )
    assert config.policy.type_names() == ("email", "native", "legacy")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"source": "sidekiq"}, "source must be one of"),
        ({"taskTypes": [{"name": "a", "source": "kafka"}]}, "source of 'a'"),
        ({"taskTypes": [{"name": "a", "queues": ["q"]}]}, "queues of 'a' applies to"),
        ({"taskTypes": [{"name": "a", "source": "taskscale", "tasks": ["t"]}]}, "tasks of 'a'"),
        ({"source": "list", "taskTypes": [{"name": "a", "queues": []}]}, "queues of 'a'"),
        ({"source": "list", "taskTypes": [{"name": "a", "queues": "q"}]}, "queues of 'a'"),
        ({"source": "list", "taskTypes": [{"name": "a", "queues": ["q", "q"]}]}, "twice"),
        ({"source": "list", "taskTypes": [{"name": "a", "queues": ["a b"]}]}, "queue name"),
        ({"source": "rq", "taskTypes": [{"name": "a", "tasks": ["x:y"]}]}, "task name"),
        (
            {"source": "celery", "taskTypes": [{"name": "a", "maxQueueWaitSeconds": 5}]},
            "maxQueueWaitSeconds of 'a' needs source taskscale",
        ),
        ({"source": "rq", "redis": {"url": "redis://r", "namespace": "a,b"}}, "one redis.names"),
        ({"source": "rq", "redis": {"url": "redis+cluster://r:7000"}}, "not a Redis Cluster"),
    ],
)
def test_a_source_spec_that_cannot_apply_is_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        config_from_object(scaler_object(**spec))


def test_the_crd_offers_the_same_sources_and_fields() -> None:
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    item = spec["properties"]["taskTypes"]["items"]["properties"]
    assert tuple(spec["properties"]["source"]["enum"]) == SOURCE_KINDS
    assert tuple(item["source"]["enum"]) == SOURCE_KINDS
    assert "default" not in item["source"]  # absent = the scaler's source
    assert {"queues", "tasks"} <= item.keys()
