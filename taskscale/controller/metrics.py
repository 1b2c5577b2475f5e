"""The controller's Prometheus metrics, and the small HTTP server that serves them.

Every metric the controller exports is defined here, so names, units and
labels are reviewed in one place: one ``taskscale_`` prefix, base units,
``_total`` counters, and labels drawn from small known sets (scaler
``namespace/name``, task type, a fixed list of operations and reasons --
never a task id or an error message).  Error counters are created at 0 for
every operation, so a dashboard or an alert sees the series before the first
error.  Each :class:`ControllerMetrics` has its own registry, so tests and
several controllers in one process never share counters.
"""

from __future__ import annotations

import contextlib

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from taskscale.controller.types import Observation, ReasonCode
from taskscale.metrics import register_process_metrics

#: Redis operations whose failures are counted (label ``operation``).
REDIS_OPERATIONS = ("observe", "demand")
#: Kubernetes API operations whose failures are counted (label ``operation``).
API_OPERATIONS = (
    "get_scale",
    "patch_scale",
    "list_pods",
    "patch_pod",
    "patch_status",
    "create_event",
    "list_scalers",
    "watch_scalers",
    "get_secret",
    "lease",
)
DIRECTIONS = ("up", "down")


class ControllerMetrics:
    """All controller metrics, on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        register_process_metrics(r, "controller")
        self.desired_replicas = Gauge(
            "taskscale_desired_replicas",
            "Replicas the policy asked for in the last reconcile.",
            ["scaler"],
            registry=r,
        )
        self.current_replicas = Gauge(
            "taskscale_current_replicas",
            "Replicas the target was set to when last read.",
            ["scaler"],
            registry=r,
        )
        self._observed = {
            field: Gauge(
                f"taskscale_observed_{field}_tasks",
                f"Tasks {help_text} at the last observation.",
                ["scaler", "type"],
                registry=r,
            )
            for field, help_text in (
                ("queued", "ready in the queues"),
                ("due", "delayed and already due"),
                ("upcoming", "delayed and due within the warm-up lead"),
                ("active", "running (ACTIVE_TASKS)"),
            )
        }
        self.observed_idle_seconds = Gauge(
            "taskscale_observed_idle_seconds",
            "Seconds since the last task of the type finished (Redis clock).",
            ["scaler", "type"],
            registry=r,
        )
        self.oldest_task_age = Gauge(
            "taskscale_oldest_task_age_seconds",
            "Seconds the oldest ready (or due) task of the type has waited (0 = none waiting).",
            ["scaler", "type"],
            registry=r,
        )
        self.scale_events = Counter(
            "taskscale_scale_events_total",
            "Scale changes applied, by direction and decision reason.",
            ["scaler", "direction", "reason"],
            registry=r,
        )
        self.decisions = Counter(
            "taskscale_decisions_total",
            "Policy decisions, by reason.",
            ["scaler", "reason"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "taskscale_reconcile_duration_seconds",
            "Time of one reconcile pass of one scaler (observe, decide, apply, report).",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.redis_errors = Counter(
            "taskscale_redis_errors_total",
            "Failed Redis calls (every attempt, retried or not).",
            ["operation"],
            registry=r,
        )
        self.api_errors = Counter(
            "taskscale_kube_api_errors_total",
            "Failed Kubernetes API calls (every attempt, retried or not).",
            ["operation"],
            registry=r,
        )
        self.leader = Gauge(
            "taskscale_leader",
            "1 while this controller holds the leader Lease (or runs without election).",
            registry=r,
        )
        self.scalers = Gauge("taskscale_scalers", "TaskScalers being reconciled.", registry=r)
        for op in REDIS_OPERATIONS:
            self.redis_errors.labels(operation=op)
        for op in API_OPERATIONS:
            self.api_errors.labels(operation=op)

    # --- recording -----------------------------------------------------------
    def count_redis_error(self, operation: str) -> None:
        self.redis_errors.labels(operation=_known(operation, REDIS_OPERATIONS)).inc()

    def count_api_error(self, operation: str) -> None:
        self.api_errors.labels(operation=_known(operation, API_OPERATIONS)).inc()

    def record_observation(self, scaler: str, observation: Observation) -> None:
        for name, t in observation.types.items():
            for field, gauge in self._observed.items():
                gauge.labels(scaler=scaler, type=name).set(getattr(t, field))
            idle = 0.0 if t.idle_since is None else max(0.0, observation.at - t.idle_since)
            if t.active or t.queued or t.due:
                idle = 0.0
            self.observed_idle_seconds.labels(scaler=scaler, type=name).set(idle)
            age = max(t.oldest_ready_s or 0.0, t.oldest_due_s or 0.0)
            self.oldest_task_age.labels(scaler=scaler, type=name).set(age)

    def record_decision(self, scaler: str, *, current: int, desired: int, reason: str) -> None:
        self.current_replicas.labels(scaler=scaler).set(current)
        self.desired_replicas.labels(scaler=scaler).set(desired)
        self.decisions.labels(scaler=scaler, reason=_known(reason, ReasonCode.ALL)).inc()

    def record_scale(self, scaler: str, *, before: int, after: int, reason: str) -> None:
        direction = "up" if after > before else "down"
        self.scale_events.labels(
            scaler=scaler, direction=direction, reason=_known(reason, ReasonCode.ALL)
        ).inc()
        self.current_replicas.labels(scaler=scaler).set(after)

    def forget_scaler(self, scaler: str, types: tuple[str, ...]) -> None:
        """Drop a deleted scaler's series, so label sets don't grow forever."""
        for gauge in (self.desired_replicas, self.current_replicas):
            _remove(gauge, scaler)
        for name in types:
            for gauge in (
                *self._observed.values(),
                self.observed_idle_seconds,
                self.oldest_task_age,
            ):
                _remove(gauge, scaler, name)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The current value of one series (tests and the demo read it)."""
        return self.registry.get_sample_value(name, labels or {})


def _known(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


def _remove(metric: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)
