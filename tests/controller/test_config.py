"""A TaskScaler object becomes a ScalerConfig with the CRD's defaults, and a
spec the controller can't apply is refused with a message naming the field."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from support.controller import CRD, scaler_object
from taskscale.controller.config import InvalidSpec, config_from_object
from taskscale.controller.types import ScalingPolicy, TypePolicy


def test_minimal_spec_gets_the_documented_defaults() -> None:
    config = config_from_object(scaler_object())

    assert config.key == "jobs/emails"
    assert config.target == "email-worker"
    assert config.generation == 4
    assert config.redis.url == "redis://redis:6379/0"
    assert config.redis.key_namespace == "taskscale"
    assert config.poll_interval_s == 5.0
    assert config.policy == ScalingPolicy(
        types=(TypePolicy("email", 300.0),),
        tasks_per_replica=4,  # `taskscale worker --threads` default
        min_replicas=0,
        max_replicas=10,
        scale_up_stabilization_s=0.0,
        scale_down_stabilization_s=60.0,
        warmup_lead_s=30.0,
    )


def test_config_defaults_match_the_crd_schema_defaults() -> None:
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    defaults = {k: v["default"] for k, v in spec["properties"].items() if "default" in v}
    config = config_from_object(scaler_object())
    policy = config.policy
    assert defaults == {
        "tasksPerReplica": policy.tasks_per_replica,
        "minReplicas": policy.min_replicas,
        "maxReplicas": policy.max_replicas,
        "scaleUpStabilizationSeconds": policy.scale_up_stabilization_s,
        "scaleDownStabilizationSeconds": policy.scale_down_stabilization_s,
        "maxScaleUpStep": policy.max_scale_up_step,
        "maxScaleDownStep": policy.max_scale_down_step,
        "warmupLeadSeconds": policy.warmup_lead_s,
        "provisioningLeadSeconds": policy.provisioning_lead_s,
        "rateWindowSeconds": policy.rate_window_s,
        "pollIntervalSeconds": config.poll_interval_s,
        "source": "taskscale" if not config.sources else "?",
    }
    idle = spec["properties"]["taskTypes"]["items"]["properties"]["idleThresholdSeconds"]
    assert idle["default"] == policy.types[0].idle_threshold_s


def test_full_spec_is_read_field_by_field() -> None:
    config = config_from_object(
        scaler_object(
            redis={"urlSecretRef": {"name": "redis", "key": "url"}, "namespace": "jobs"},
            taskTypes=[
                {"name": "email", "idleThresholdSeconds": 10},
                {"name": "pdf", "idleThresholdSeconds": 600},
            ],
            tasksPerReplica=4,
            minReplicas=1,
            maxReplicas=20,
            scaleUpStabilizationSeconds=5,
            scaleDownStabilizationSeconds=120,
            maxScaleUpStep=3,
            maxScaleDownStep=2,
            warmupLeadSeconds=45,
            pollIntervalSeconds=0.5,
        )
    )
    assert config.redis.url is None
    assert (config.redis.secret_name, config.redis.secret_key) == ("redis", "url")
    assert config.redis.key_namespace == "jobs"
    assert config.policy.types == (TypePolicy("email", 10.0), TypePolicy("pdf", 600.0))
    p = config.policy
    assert (p.tasks_per_replica, p.min_replicas, p.max_replicas) == (4, 1, 20)
    assert (p.scale_up_stabilization_s, p.scale_down_stabilization_s) == (5.0, 120.0)
    assert (p.max_scale_up_step, p.max_scale_down_step, p.warmup_lead_s) == (3, 2, 45.0)
    assert config.poll_interval_s == 0.5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"redis": {"url": "redis://r", "urlSecretRef": {"name": "s", "key": "k"}}},
            "exactly one",
        ),
        ({"redis": {"namespace": "x"}}, "exactly one"),
        ({"redis": {"url": "localhost:6379"}}, "redis.url"),
        ({"redis": {"urlSecretRef": {"name": "s"}}}, "name and key"),
        ({"taskTypes": []}, "taskTypes"),
        ({"taskTypes": [{"name": "a"}, {"name": "a"}]}, "twice"),
        ({"taskTypes": [{"name": "a:b"}]}, "task type"),
        ({"taskTypes": [{"name": "a", "idleThresholdSeconds": -1}]}, "idleThresholdSeconds"),
        ({"minReplicas": 5, "maxReplicas": 2}, "maxReplicas"),
        ({"tasksPerReplica": 0}, "tasksPerReplica"),
        ({"minReplicas": "3"}, "minReplicas"),
        ({"pollIntervalSeconds": 0}, "pollIntervalSeconds"),
        ({"scaleTargetRef": {}}, "scaleTargetRef"),
        # NaN passes a "< 0" check; the policy would then compare with NaN
        ({"warmupLeadSeconds": math.nan}, "warmupLeadSeconds must be a finite number"),
        ({"scaleDownStabilizationSeconds": math.inf}, "scaleDownStabilizationSeconds must"),
        ({"rateWindowSeconds": math.nan}, "rateWindowSeconds must be positive"),
        ({"taskTypes": [{"name": "a", "idleThresholdSeconds": math.nan}]}, "idleThreshold"),
        ({"taskTypes": [{"name": "a", "maxQueueWaitSeconds": math.inf}]}, "maxQueueWait"),
    ],
)
def test_invalid_spec_is_refused_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        config_from_object(scaler_object(**spec))
