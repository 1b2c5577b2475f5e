"""The Kubernetes actuators: any scalable target -- a Deployment, a
StatefulSet, or any custom resource with a ``scale`` subresource (an Argo
Rollout, another operator's CR).

``scaleTargetRef: {apiVersion, kind, name}`` defaults to ``apps/v1``
``Deployment`` (:class:`DeploymentActuator`, which before a scale-down sets
``controller.kubernetes.io/pod-deletion-cost`` on the Deployment's pods from
the worker registry's busy counts, so the ReplicaSet removes idle pods first,
and on every pass marks busy pods against voluntary disruption and names the
pods on leaving nodes: :meth:`DeploymentActuator.mark_pods`, in
controller/disruption.py).
Other ``apps/v1`` kinds use their typed ``scale`` calls; anything else goes
through the custom-objects ``scale`` calls, with the kind's plural found once
by discovery (``get_api_resources``: ``GET /apis/{group}/{version}``), which also says whether the
kind has a ``scale`` subresource at all -- a kind without one is reported as
``TargetNotFound`` with that reason, never written to.

Only the ``scale`` subresource is ever written.  Pod-deletion-cost is set
before a scale-down only when the scale reports a label selector
(``status.selector``) to find the target's pods by; a custom resource
without ``labelSelectorPath`` gets its replicas set and nothing else.

A StatefulSet ignores pod-deletion-cost: scaling it down always removes the
highest ordinals, busy or not.  So none is written for one; instead the
reconcile pass never scales a StatefulSet below (highest ordinal of a pod
running a task) + 1 (rules/ordinal_hold.py), and its busy workers are safe only
that way -- a task on ordinal 5 keeps six pods up until it ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskscale.controller.config import ScalerConfig, TargetRef
from taskscale.controller.disruption import PodMarks, mark_pods, patch_pod, pods_gone
from taskscale.controller.kube_client import (
    DELETION_COST,
    FIELD_MANAGER,
    REQUEST_TIMEOUT_S,
    api_call,
)
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import TargetNotFound
from taskscale.controller.types import Rollout
from taskscale.retrying import RetrySettings

T = TypeVar("T")

log = logging.getLogger("taskscale.controller.kube")

_APPS_KINDS = {"StatefulSet": "stateful_set", "ReplicaSet": "replica_set"}


@dataclass
class DeploymentActuator:
    """A Deployment's ``scale`` subresource (the Actuator protocol)."""

    apps: client.AppsV1Api
    core: client.CoreV1Api
    namespace: str
    name: str
    metrics: ControllerMetrics
    retry: RetrySettings = field(default_factory=RetrySettings)
    scaler: str | None = None  #: ``namespace/name`` of the TaskScaler, for error metrics
    _selector: str | None = None
    _replicas: int | None = None
    _status_forbidden: bool = False  #: a 403 on deployments/status was logged

    def current_replicas(self) -> int:
        scale = self._call(
            "get_scale",
            lambda: self.apps.read_namespaced_deployment_scale(
                self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S
            ),
        )
        self._selector = scale.status.selector if scale.status is not None else None
        self._replicas = int(scale.spec.replicas or 0) if scale.spec is not None else 0
        return self._replicas

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        if self._replicas is None:
            self.current_replicas()
        if self._replicas is not None and replicas < self._replicas:
            self.set_deletion_costs(busy_by_pod)
        self._call(
            "patch_scale",
            lambda: self.apps.patch_namespaced_deployment_scale(
                self.name,
                self.namespace,
                {"spec": {"replicas": replicas}},
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT_S,
            ),
        )
        self._replicas = replicas

    def rollout(self) -> Rollout | None:
        """The Deployment's rollout, from its ``status`` subresource (the
        one read of the Deployment itself: ``get deployments/status``).

        None when the controller may not read it (403: a Role from before
        the rollout hold): the scale-down goes on as it did then, with a
        warning logged once, rather than every scale-down failing."""
        try:
            deployment = self._call(
                "get_status",
                lambda: self.apps.read_namespaced_deployment_status(
                    self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S
                ),
            )
        except ApiException as exc:
            if exc.status != 403:
                raise
            if not self._status_forbidden:
                self._status_forbidden = True
                log.warning(
                    "%s: may not get deployments/status of %s/%s (grant it: the chart's RBAC "
                    "does); scaling down without the rollout hold",
                    self.scaler,
                    self.namespace,
                    self.name,
                )
            return None
        return rollout_of(deployment)

    def set_deletion_costs(self, busy_by_pod: Mapping[str, int]) -> dict[str, int]:
        """Annotate every live pod of the Deployment with its busy count (0 if
        the registry doesn't know it); returns pod -> cost.  Pods whose
        annotation already says so are not written."""
        if not self._selector:
            self.current_replicas()
        selector = self._selector or ""
        pods = self._call(
            "list_pods",
            lambda: self.core.list_namespaced_pod(
                self.namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT_S
            ),
        )
        costs: dict[str, int] = {}
        for pod in pods.items:
            meta = pod.metadata
            if meta is None or meta.name is None or meta.deletion_timestamp is not None:
                continue
            cost = int(busy_by_pod.get(meta.name, 0))
            costs[meta.name] = cost
            if (meta.annotations or {}).get(DELETION_COST) != str(cost):
                self._annotate(meta.name, cost)
        return costs

    def mark_pods(self, busy_by_pod: Mapping[str, int]) -> PodMarks | None:
        """Every pass: busy pods marked against voluntary disruption, idle ones
        unmarked, pods on leaving nodes named (controller/disruption.py)."""
        if not self._selector:
            self.current_replicas()
        if not self._selector:  # no selector: the target's pods can't be told apart
            return None
        return mark_pods(self.core, self.namespace, self._selector, busy_by_pod, call=self._call)

    def pods_gone(self, names: Collection[str]) -> set[str]:
        """Which of ``names`` are no pod of the namespace any more."""
        return pods_gone(self.core, self.namespace, names, call=self._call)

    def _annotate(self, pod: str, cost: int) -> None:
        body = {"metadata": {"annotations": {DELETION_COST: str(cost)}}}
        patch_pod(self.core, self.namespace, pod, body, call=self._call)

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        try:
            return api_call(
                fn, operation=operation, metrics=self.metrics, retry=self.retry, scaler=self.scaler
            )
        except ApiException as exc:
            if exc.status == 404 and operation in ("get_scale", "patch_scale", "get_status"):
                raise TargetNotFound(f"deployment {self.namespace}/{self.name} not found") from None
            raise


@dataclass
class ScaleTargetActuator(DeploymentActuator):
    """The ``scale`` subresource of any kind that has one (the Actuator protocol)."""

    ref: TargetRef = field(default_factory=TargetRef)
    custom: client.CustomObjectsApi | None = None
    _plural: str | None = None

    def current_replicas(self) -> int:
        scale = self._call("get_scale", self._read)
        spec, status = _part(scale, "spec"), _part(scale, "status")
        self._selector = _field(status, "selector") or None
        self._replicas = int(_field(spec, "replicas") or 0)
        return self._replicas

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        if self._replicas is None:
            self.current_replicas()
        if self._replicas is not None and replicas < self._replicas and self._uses_costs():
            self.set_deletion_costs(busy_by_pod)
        self._call("patch_scale", lambda: self._patch(replicas))
        self._replicas = replicas

    def rollout(self) -> Rollout | None:
        return None  # only a Deployment's rollout is read (rules/rollout_hold.py)

    def set_deletion_costs(self, busy_by_pod: Mapping[str, int]) -> dict[str, int]:
        if not self._selector:
            self.current_replicas()
        if not self._selector:  # no selector: the target's pods can't be told apart
            return {}
        return super().set_deletion_costs(busy_by_pod)

    def _uses_costs(self) -> bool:
        """Whether pod-deletion-cost steers this target's scale-down: its pods
        can be found (a selector) and it is not a StatefulSet, which removes
        the highest ordinals whatever the costs say (rules/ordinal_hold.py)."""
        stateful = self.ref.group == "apps" and self.ref.kind == "StatefulSet"
        return bool(self._selector) and not stateful

    # --- the calls, by kind ------------------------------------------------------
    def _read(self) -> Any:
        if self.ref.group == "apps" and self.ref.kind in _APPS_KINDS:
            method = getattr(self.apps, f"read_namespaced_{_APPS_KINDS[self.ref.kind]}_scale")
            return method(self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S)
        return self._customs().get_namespaced_custom_object_scale(
            self.ref.group,
            self.ref.version,
            self.namespace,
            self._plural_name(),
            self.name,
            _request_timeout=REQUEST_TIMEOUT_S,
        )

    def _patch(self, replicas: int) -> Any:
        body = {"spec": {"replicas": replicas}}
        if self.ref.group == "apps" and self.ref.kind in _APPS_KINDS:
            method = getattr(self.apps, f"patch_namespaced_{_APPS_KINDS[self.ref.kind]}_scale")
            return method(
                self.name,
                self.namespace,
                body,
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        return self._customs().patch_namespaced_custom_object_scale(
            self.ref.group,
            self.ref.version,
            self.namespace,
            self._plural_name(),
            self.name,
            body,
            field_manager=FIELD_MANAGER,
            _request_timeout=REQUEST_TIMEOUT_S,
        )

    def _customs(self) -> client.CustomObjectsApi:
        if self.custom is None:
            self.custom = client.CustomObjectsApi(self.apps.api_client)
        return self.custom

    def _plural_name(self) -> str:
        """The kind's resource name, from discovery (cached); TargetNotFound
        when the API has no such kind or the kind has no scale subresource."""
        if self._plural is not None:
            return self._plural
        if not self.ref.group:
            raise TargetNotFound(f"{self.ref.kind}: core-group kinds are not supported")
        try:
            found: Any = api_call(
                lambda: self._customs().get_api_resources(
                    self.ref.group, self.ref.version, _request_timeout=REQUEST_TIMEOUT_S
                ),
                operation="get_scale",
                metrics=self.metrics,
                retry=self.retry,
                scaler=self.scaler,
            )
        except ApiException as exc:
            if exc.status == 404:
                raise TargetNotFound(f"the API serves no {self.ref.api_version}") from None
            raise
        resources = list(getattr(found, "resources", None) or [])
        names = {str(r.name) for r in resources}
        for resource in resources:
            name = str(resource.name)
            if resource.kind == self.ref.kind and "/" not in name:
                if f"{name}/scale" not in names:
                    raise TargetNotFound(
                        f"{self.ref.kind} ({self.ref.api_version}) has no scale subresource"
                    )
                self._plural = name
                return name
        raise TargetNotFound(f"the API serves no {self.ref.kind} in {self.ref.api_version}")

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        try:
            return super()._call(operation, fn)
        except TargetNotFound as exc:
            if "not found" in str(exc) and str(exc).startswith("deployment "):
                what = f"{self.ref.kind} ({self.ref.api_version})"
                raise TargetNotFound(f"{what} {self.namespace}/{self.name} not found") from None
            raise


def make_actuator(
    config: ScalerConfig,
    *,
    apps: client.AppsV1Api,
    core: client.CoreV1Api,
    metrics: ControllerMetrics,
    retry: RetrySettings,
    scaler: str | None = None,
) -> DeploymentActuator:
    """The actuator for ``config``'s scaleTargetRef (a Deployment's as before);
    ``scaler`` (``namespace/name``) labels its API error metrics."""
    ref = config.target_ref
    target = (apps, core, config.namespace, config.target, metrics, retry)
    if ref == TargetRef():
        return DeploymentActuator(*target, scaler=scaler)
    return ScaleTargetActuator(*target, scaler=scaler, ref=ref)


def rollout_of(deployment: client.V1Deployment) -> Rollout:
    """A Deployment object's rollout (a missing count reads as 0)."""
    meta, spec = deployment.metadata, deployment.spec
    status = deployment.status or client.V1DeploymentStatus()
    conditions = status.conditions or ()
    return Rollout(
        generation=int((meta.generation if meta else None) or 0),
        observed_generation=int(status.observed_generation or 0),
        replicas=int(spec.replicas if spec and spec.replicas is not None else 1),
        updated=int(status.updated_replicas or 0),
        total=int(status.replicas or 0),
        unavailable=int(status.unavailable_replicas or 0),
        paused=bool(spec and spec.paused),
        stalled=any(
            c.type == "Progressing" and c.reason == "ProgressDeadlineExceeded" for c in conditions
        ),
    )


def _part(scale: Any, name: str) -> Any:
    return scale.get(name) if isinstance(scale, Mapping) else getattr(scale, name, None)


def _field(part: Any, name: str) -> Any:
    if part is None:
        return None
    return part.get(name) if isinstance(part, Mapping) else getattr(part, name, None)
