"""``provisioningLeadSeconds``: node provisioning time added to the warm-up lead
for the look-ahead on delayed tasks.  Read from the spec (and refused when
malformed), and used by the reconcile pass against a real Redis: a task due
within warm-up + provisioning scales up now, one due later does not."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from support.controller import MemoryActuator, scaler_object
from taskscale.controller.config import InvalidSpec, RedisRef, ScalerConfig, config_from_object
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings, RetrySettings
from taskscale.controller.types import ReasonCode, ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration

WARMUP_S, PROVISIONING_S = 30.0, 90.0


def test_the_spec_field_is_read_and_summed_into_the_look_ahead() -> None:
    body = scaler_object(warmupLeadSeconds=30, provisioningLeadSeconds=90)
    policy = config_from_object(body).policy
    assert (policy.provisioning_lead_s, policy.lookahead_s) == (90, 120)
    unset = config_from_object(scaler_object(warmupLeadSeconds=30)).policy
    assert (unset.provisioning_lead_s, unset.lookahead_s) == (0, 30)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "provisioningLeadSeconds must be a finite number >= 0"),
        (math.nan, "provisioningLeadSeconds must be a finite number"),
        (math.inf, "provisioningLeadSeconds must be a finite number"),
        ("120", "provisioningLeadSeconds"),
        (True, "provisioningLeadSeconds"),
    ],
)
def test_a_malformed_value_is_refused_naming_the_field(value: Any, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        config_from_object(scaler_object(provisioningLeadSeconds=value))


@pytest.fixture
def reconciler() -> Iterator[Reconciler]:
    fast = RetrySettings(attempts=3, initial_s=0.01, max_s=0.02)
    settings = ReconcilerSettings(redis=fast, redis_timeout_s=0.5, error_backoff_initial_s=0.2)
    rec = Reconciler(reporter=None, metrics=ControllerMetrics(), settings=settings)
    yield rec
    rec.close()


def config(provisioning_s: float) -> ScalerConfig:
    policy = ScalingPolicy(
        types=(TypePolicy("report", idle_threshold_s=0.0),),
        tasks_per_replica=1,
        warmup_lead_s=WARMUP_S,
        provisioning_lead_s=provisioning_s,
        scale_down_stabilization_s=0.0,
    )
    return ScalerConfig(
        name="reports",
        namespace="default",
        target="report-worker",
        redis=RedisRef(url="unused"),
        policy=policy,
        poll_interval_s=3600.0,
    )


def replicas_for(
    reconciler: Reconciler, redis_url: str, scaler: ScalerConfig
) -> tuple[int, str, str]:
    actuator = MemoryActuator(replicas=0)
    reconciler.upsert(scaler, actuator=actuator, redis_url=redis_url)
    outcome = reconciler.reconcile_now(scaler.key)
    reconciler.remove(scaler.key)
    assert outcome.decision is not None
    return actuator.replicas, outcome.decision.reason_code, outcome.decision.reason


def test_a_task_due_within_warm_up_plus_provisioning_scales_up_now(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    producer = Producer(r, keys=keys)
    # due 10 s before the sum (120 s): past the warm-up lead alone
    producer.enqueue("report", delay=WARMUP_S + PROVISIONING_S - 10)
    replicas, code, why = replicas_for(reconciler, redis_url, config(PROVISIONING_S))
    assert (replicas, code) == (1, ReasonCode.LOOKAHEAD)
    assert "1 delayed due within 120 s (30 s warm-up + 90 s node provisioning)" in why
    # the same task without the provisioning lead is not demand yet
    without = dataclasses.replace(config(0.0), name="plain")
    assert replicas_for(reconciler, redis_url, without)[0] == 0


def test_a_task_due_after_warm_up_plus_provisioning_does_not(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    Producer(r, keys=keys).enqueue("report", delay=WARMUP_S + PROVISIONING_S + 10)
    assert replicas_for(reconciler, redis_url, config(PROVISIONING_S))[0] == 0
