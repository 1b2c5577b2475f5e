"""The controller's Prometheus metrics, and the small HTTP server that serves them.

Every metric the controller exports is defined here, so names, units and
labels are reviewed in one place: one ``taskscale_`` prefix, base units,
``_total`` counters, and labels drawn from small known sets (the TaskScaler's
``namespace`` and ``name``, task type, a fixed list of operations and reasons
-- never a task id or an error message).

A scaler is two labels, ``namespace`` and ``name``, the names kube-state-metrics
uses for a custom resource's metadata, so a query can join our series with
``kube_customresource_*`` (or, through ``namespace``, with any Kubernetes
object's).  The controller reports on many namespaces, so its scrape must keep
these labels (``honorLabels: true``, as the chart's ServiceMonitor sets).

Error counters are created at 0 for every operation -- per scaler for the
calls made on a scaler's behalf, with empty scaler labels for the rest
(listing and watching TaskScalers, the Lease) -- so a dashboard or an alert
sees the series before the first error.  Each :class:`ControllerMetrics` has
its own registry, so tests and several controllers in one process never share
counters.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from taskscale.controller.rules.no_scheduler import scheduler_alive
from taskscale.controller.rules.queue_wait import oldest_wait
from taskscale.controller.types import Observation, Protection, ReasonCode
from taskscale.metrics import register_process_metrics

#: Redis operations whose failures are counted (label ``operation``).
REDIS_OPERATIONS = ("observe", "demand")
#: Kubernetes API operations whose failures are counted (label ``operation``).
API_OPERATIONS = (
    "get_scale",
    "patch_scale",
    "get_status",
    "list_pods",
    "patch_pod",
    "get_pod",
    "list_nodes",
    "patch_status",
    "create_event",
    "list_scalers",
    "watch_scalers",
    "get_secret",
    "lease",
    "list_jobs",
    "create_job",
    "delete_job",
)
#: API operations made on no particular scaler's behalf (empty scaler labels).
UNSCOPED_API_OPERATIONS = ("list_scalers", "watch_scalers", "lease")
DIRECTIONS = ("up", "down")
#: Phases of a Job-mode scaler's Jobs (taskscale_jobs; controller/job_demand.py).
JOB_PHASES = ("pending", "running", "succeeded", "failed")
SCALER = ("namespace", "name")
#: Redis stats counters re-exported per type: (field of TypeObservation, name, help).
_REDIS_COUNTERS = (
    ("completed_total", "completed_tasks", "Tasks that completed, counted in Redis."),
    ("failed_total", "failed_runs", "Task runs that raised (each attempt), counted in Redis."),
    ("dead_total", "dead_tasks", "Tasks moved to the dead-letter list, counted in Redis."),
    (
        "dead_dropped_total",
        "dead_dropped_tasks",
        "Oldest dead letters dropped by the dead-letter cap, counted in Redis.",
    ),
    (
        "cancelled_total",
        "cancelled_tasks",
        "Queued or delayed tasks removed by a cancel (or a schedule change), counted in Redis.",
    ),
    (
        "unique_hits_total",
        "unique_hits",
        "Enqueues skipped because their unique key was held (the holder's id returned).",
    ),
)


class ControllerMetrics:
    """All controller metrics, on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        register_process_metrics(r, "controller")
        self.desired_replicas = Gauge(
            "taskscale_desired_replicas",
            "Replicas the policy asked for in the last reconcile.",
            SCALER,
            registry=r,
        )
        self.current_replicas = Gauge(
            "taskscale_current_replicas",
            "Replicas the target was set to when last read.",
            SCALER,
            registry=r,
        )
        self.rollout_hold = Gauge(
            "taskscale_rollout_hold",
            "1 while the last pass held a scale-down for the target's rollout (RolloutHold).",
            SCALER,
            registry=r,
        )
        self.max_replicas = Gauge(
            "taskscale_max_replicas",
            "The TaskScaler's maxReplicas.",
            SCALER,
            registry=r,
        )
        self.pods_protected = Gauge(
            "taskscale_pods_protected",
            "Busy pods of the target marked against voluntary disruption at the last pass.",
            SCALER,
            registry=r,
        )
        self.pods_draining = Gauge(
            "taskscale_pods_draining",
            "Pods of the target on a cordoned node or one tainted for removal "
            "(flagged in Redis: they claim nothing) at the last pass.",
            SCALER,
            registry=r,
        )
        self.drain_wait_seconds = Histogram(
            "taskscale_drain_wait_seconds",
            "How long a draining busy pod took to finish its work (flagged to unmarked).",
            SCALER,
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600),
            registry=r,
        )
        self.schedulers_alive = Gauge(
            "taskscale_observed_schedulers",
            "Schedulers with a live heartbeat on the scaler's Redis at the last observation.",
            SCALER,
            registry=r,
        )
        self.oldest_due_seconds = Gauge(
            "taskscale_observed_oldest_due_seconds",
            "Seconds since the oldest due, not yet promoted, delayed task became due "
            "(0: none is due; a running scheduler keeps it near 0).",
            [*SCALER, "type"],
            registry=r,
        )
        self._observed = {
            field: Gauge(
                f"taskscale_observed_{field}_tasks",
                f"Tasks {help_text} at the last observation.",
                [*SCALER, "type"],
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
            [*SCALER, "type"],
            registry=r,
        )
        self.oldest_task_age = Gauge(
            "taskscale_oldest_task_age_seconds",
            "Seconds the oldest ready (or, while a scheduler is alive, due) task of the type "
            "has waited (0 = none waiting): what maxQueueWaitSeconds is compared with.",
            [*SCALER, "type"],
            registry=r,
        )
        self.concurrency_limit = Gauge(
            "taskscale_observed_concurrency_limit_tasks",
            "Most tasks of the type running at once, fleet-wide (taskscale limits; 0 = none).",
            [*SCALER, "type"],
            registry=r,
        )
        self.rate_limit = Gauge(
            "taskscale_observed_rate_limit_tasks_per_second",
            "Most claims of the type per second (taskscale limits; 0 = none).",
            [*SCALER, "type"],
            registry=r,
        )
        self.scale_events = Counter(
            "taskscale_scale_events_total",
            "Scale changes applied, by direction and decision reason.",
            [*SCALER, "direction", "reason"],
            registry=r,
        )
        self.decisions = Counter(
            "taskscale_decisions_total",
            "Policy decisions, by reason.",
            [*SCALER, "reason"],
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
            "Failed Redis calls (every attempt, retried or not), per scaler they served.",
            ["operation", *SCALER],
            registry=r,
        )
        self.api_errors = Counter(
            "taskscale_kube_api_errors_total",
            "Failed Kubernetes API calls (every attempt, retried or not).",
            ["operation", *SCALER],
            registry=r,
        )
        self.jobs = Gauge(
            "taskscale_jobs",
            "A Job-mode scaler's Jobs by phase at the last pass: pending (no worker has "
            "claimed yet: no pod, Pending, or starting), running, succeeded, failed (kept).",
            [*SCALER, "phase"],
            registry=r,
        )
        self.jobs_created = Counter(
            "taskscale_jobs_created_total",
            "Jobs a Job-mode scaler created (one per task to run).",
            SCALER,
            registry=r,
        )
        self.leader = Gauge(
            "taskscale_leader",
            "1 while this controller holds the leader Lease (or runs without election).",
            registry=r,
        )
        self.scalers = Gauge("taskscale_scalers", "TaskScalers being reconciled.", registry=r)
        for op in REDIS_OPERATIONS:
            self.redis_errors.labels(op, "", "")
        for op in API_OPERATIONS:
            self.api_errors.labels(op, "", "")
        self._redis_counters = _RedisCounters()
        r.register(self._redis_counters)

    # --- recording -----------------------------------------------------------
    def add_scaler(self, scaler: str, *, max_replicas: int) -> None:
        """A scaler is reconciled: its error series start at 0, its max is known."""
        ns, name = split_scaler(scaler)
        for op in REDIS_OPERATIONS:
            self.redis_errors.labels(op, ns, name)
        for op in API_OPERATIONS:
            if op not in UNSCOPED_API_OPERATIONS:
                self.api_errors.labels(op, ns, name)
        self.max_replicas.labels(ns, name).set(max_replicas)

    def count_redis_error(self, operation: str, *scalers: str) -> None:
        """One failed call, counted for each scaler it was made for."""
        op = _known(operation, REDIS_OPERATIONS)
        for labels in [split_scaler(s) for s in scalers] or [("", "")]:
            self.redis_errors.labels(op, *labels).inc()

    def count_api_error(self, operation: str, scaler: str | None = None) -> None:
        labels = split_scaler(scaler) if scaler else ("", "")
        self.api_errors.labels(_known(operation, API_OPERATIONS), *labels).inc()

    def record_observation(self, scaler: str, observation: Observation) -> None:
        ns, name = split_scaler(scaler)
        if observation.schedulers_alive is not None:
            self.schedulers_alive.labels(ns, name).set(observation.schedulers_alive)
        for type_name, t in observation.types.items():
            for field, gauge in self._observed.items():
                gauge.labels(ns, name, type_name).set(getattr(t, field))
            idle = 0.0 if t.idle_since is None else max(0.0, observation.at - t.idle_since)
            if t.active or t.queued or t.due:
                idle = 0.0
            self.observed_idle_seconds.labels(ns, name, type_name).set(idle)
            self.oldest_due_seconds.labels(ns, name, type_name).set(t.oldest_due_s or 0.0)
            age = oldest_wait(t, scheduler_alive=scheduler_alive(observation))
            self.oldest_task_age.labels(ns, name, type_name).set(age or 0.0)
            self._redis_counters.set(
                (ns, name, type_name), tuple(getattr(t, f) for f, _, _ in _REDIS_COUNTERS)
            )
            self.concurrency_limit.labels(ns, name, type_name).set(t.concurrency_limit or 0)
            self.rate_limit.labels(ns, name, type_name).set(t.rate_limit_per_s or 0)

    def record_decision(self, scaler: str, *, current: int, desired: int, reason: str) -> None:
        ns, name = split_scaler(scaler)
        self.current_replicas.labels(ns, name).set(current)
        self.desired_replicas.labels(ns, name).set(desired)
        self.decisions.labels(ns, name, _known(reason, ReasonCode.ALL)).inc()
        self.rollout_hold.labels(ns, name).set(int(reason == ReasonCode.ROLLOUT_HOLD))

    def record_scale(self, scaler: str, *, before: int, after: int, reason: str) -> None:
        ns, name = split_scaler(scaler)
        direction = "up" if after > before else "down"
        self.scale_events.labels(ns, name, direction, _known(reason, ReasonCode.ALL)).inc()
        self.current_replicas.labels(ns, name).set(after)

    def record_jobs(self, scaler: str, phases: dict[str, int]) -> None:
        """A Job-mode scaler's Jobs by phase (job_demand.JobCensus.as_dict)."""
        ns, name = split_scaler(scaler)
        for phase in JOB_PHASES:
            self.jobs.labels(ns, name, phase).set(phases.get(phase, 0))

    def count_jobs_created(self, scaler: str, created: int) -> None:
        ns, name = split_scaler(scaler)
        self.jobs_created.labels(ns, name).inc(created)

    def record_protection(self, scaler: str, protection: Protection) -> None:
        ns, name = split_scaler(scaler)
        self.pods_protected.labels(ns, name).set(len(protection.protected))
        self.pods_draining.labels(ns, name).set(len(protection.draining))
        for waited in protection.drained.values():
            self.drain_wait_seconds.labels(ns, name).observe(waited)

    def forget_scaler(self, scaler: str, types: tuple[str, ...]) -> None:
        """Drop a deleted scaler's series, so label sets don't grow forever."""
        ns, name = split_scaler(scaler)
        for gauge in (
            self.desired_replicas,
            self.current_replicas,
            self.max_replicas,
            self.schedulers_alive,
            self.rollout_hold,
            self.pods_protected,
            self.pods_draining,
            self.drain_wait_seconds,
        ):
            _remove(gauge, ns, name)
        for op in REDIS_OPERATIONS:
            _remove(self.redis_errors, op, ns, name)
        for op in API_OPERATIONS:
            _remove(self.api_errors, op, ns, name)
        for phase in JOB_PHASES:
            _remove(self.jobs, ns, name, phase)
        _remove(self.jobs_created, ns, name)
        for type_name in types:
            for gauge in (
                *self._observed.values(),
                self.observed_idle_seconds,
                self.oldest_due_seconds,
                self.oldest_task_age,
                self.concurrency_limit,
                self.rate_limit,
            ):
                _remove(gauge, ns, name, type_name)
            self._redis_counters.forget((ns, name, type_name))

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The current value of one series (tests and the demo read it)."""
        return self.registry.get_sample_value(name, labels or {})


def split_scaler(scaler: str) -> tuple[str, str]:
    """``"ns/name"`` -> ``("ns", "name")``; a key without a namespace -> ``("", key)``."""
    ns, _, name = scaler.rpartition("/")
    return ns, name


class _RedisCounters(Collector):
    """The per-type counters of Redis's stats hashes, as last observed, exported
    as counters: they only grow (an operator's ``types forget`` resets them,
    which ``rate()`` treats as a counter reset)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str, str], tuple[int, ...]] = {}

    def set(self, labels: tuple[str, str, str], values: tuple[int, ...]) -> None:
        with self._lock:
            self._values[labels] = values

    def forget(self, labels: tuple[str, str, str]) -> None:
        with self._lock:
            self._values.pop(labels, None)

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            values = dict(self._values)
        for i, (_, name, help_text) in enumerate(_REDIS_COUNTERS):
            family = CounterMetricFamily(
                f"taskscale_observed_{name}", help_text, labels=[*SCALER, "type"]
            )
            for labels, row in sorted(values.items()):
                family.add_metric(list(labels), row[i])
            yield family


def _known(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


def _remove(metric: Gauge | Counter | Histogram, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)
