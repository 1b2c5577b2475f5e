"""How the Deployment actuator reads a rollout (scale_target.py): a Deployment
object's fields as a ``Rollout`` (missing ones as 0, a paused or stalled
rollout marked), and a controller that may not read ``deployments/status``
scales down as before instead of failing every scale-down."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import TargetNotFound
from taskscale.controller.scale_target import DeploymentActuator, rollout_of
from taskscale.controller.types import Rollout
from taskscale.retrying import RetrySettings


def deployment(
    generation: int = 2, spec: dict[str, Any] | None = None, **status: Any
) -> client.V1Deployment:
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name="w", generation=generation),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(),
            template=client.V1PodTemplateSpec(),
            **{"replicas": 4, **(spec or {})},
        ),
        status=client.V1DeploymentStatus(**status),
    )


def test_a_deployment_reads_as_its_rollout() -> None:
    rolling = deployment(
        observed_generation=2, updated_replicas=1, replicas=5, unavailable_replicas=1
    )
    assert rollout_of(rolling) == Rollout(2, 2, 4, 1, 5, unavailable=1)
    assert rollout_of(rolling).waiting_for() == "1 of 4 pods updated, 1 unavailable"
    # a new Deployment's status is empty: nothing observed yet
    assert rollout_of(deployment()).waiting_for().startswith("generation 2 not yet observed")
    # spec.replicas unset is 1, as on the API server
    assert rollout_of(deployment(spec={"replicas": None})).replicas == 1


def test_a_paused_or_stalled_rollout_is_marked_and_holds_nothing() -> None:
    paused = rollout_of(
        deployment(spec={"paused": True}, observed_generation=2, updated_replicas=1)
    )
    assert paused.paused and paused.waiting_for() == ""
    deadline = client.V1DeploymentCondition(
        type="Progressing", status="False", reason="ProgressDeadlineExceeded"
    )
    stalled = rollout_of(
        deployment(observed_generation=2, updated_replicas=1, conditions=[deadline])
    )
    assert stalled.stalled and stalled.waiting_for() == ""


class Apps:
    """An AppsV1Api whose status read answers ``status`` (an HTTP status) or a Deployment."""

    def __init__(self, answer: int | client.V1Deployment) -> None:
        self.answer = answer
        self.reads = 0

    def read_namespaced_deployment_status(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        if isinstance(self.answer, int):
            raise ApiException(status=self.answer, reason="refused")
        return self.answer


def actuator(apps: Apps) -> DeploymentActuator:
    fast = RetrySettings(attempts=2, initial_s=0.001, max_s=0.002)
    return DeploymentActuator(apps, None, "jobs", "w", ControllerMetrics(), fast, scaler="jobs/s")  # type: ignore[arg-type]


def test_a_forbidden_status_read_means_no_hold_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = actuator(Apps(403))
    with caplog.at_level(logging.WARNING, logger="taskscale.controller.kube"):
        assert target.rollout() is None
        assert target.rollout() is None
    warnings = [r for r in caplog.records if "deployments/status" in r.getMessage()]
    assert len(warnings) == 1  # once, not every scale-down


def test_another_api_error_fails_the_pass_and_a_missing_deployment_is_not_found() -> None:
    with pytest.raises(ApiException):
        actuator(Apps(500)).rollout()
    with pytest.raises(TargetNotFound):
        actuator(Apps(404)).rollout()


def test_the_status_is_read_into_a_rollout() -> None:
    apps = Apps(deployment(observed_generation=2, updated_replicas=4, replicas=4))
    assert actuator(apps).rollout() == Rollout(2, 2, 4, 4, 4)
    assert apps.reads == 1
