"""Prometheus metrics and health of one ``taskscale scheduler`` process.

Served with ``/healthz`` and ``/readyz`` on ``--metrics-port``.  What an
operator needs to see of a scheduler: that it is alive (its heartbeat in
``{ns}:schedulers`` succeeds, and how many schedulers that heartbeat counts),
how much it promotes and how late, and how many dead workers' tasks it has
returned, and how many periodic-schedule occurrences it enqueued.  The
scheduler calls :meth:`SchedulerMetrics.promoted`, :meth:`~SchedulerMetrics.occurrence`,
:meth:`~SchedulerMetrics.reaped` and :meth:`~SchedulerMetrics.beat`; this
module owns the names, units and the health rule, so ``scheduler.py`` stays
about scheduling.

The scheduler is alive (``/healthz``) while its heartbeat succeeds within
three leases, and ready once the first one did: a scheduler that cannot
reach Redis for that long is restarted, losing nothing (every state change
is a script in Redis, and any other scheduler does the same work).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from taskscale.health import METRICS_HOST, HealthState, MetricsServer
from taskscale.metrics import register_process_metrics

if TYPE_CHECKING:
    from taskscale.workflows.sweep import SweepResult

#: Lateness of promoted tasks (Redis clock), seconds.
_LATENESS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300)


class SchedulerMetrics:
    """The scheduler's series, on a registry of its own."""

    def __init__(self, *, lease_s: float) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        register_process_metrics(r, "scheduler")
        self.health = HealthState(clock=time.monotonic, stale_after_s=max(30.0, 3 * lease_s))
        self.promoted_tasks = Counter(
            "taskscale_scheduler_promoted_tasks_total",
            "Delayed tasks (and retries) this scheduler moved to their ready list.",
            registry=r,
        )
        self.lateness = Histogram(
            "taskscale_scheduler_promote_lateness_seconds",
            "How late the most overdue task of each promoting call was (Redis clock).",
            buckets=_LATENESS_BUCKETS,
            registry=r,
        )
        self.reaped_workers = Counter(
            "taskscale_scheduler_reaped_workers_total",
            "Workers whose lease expired and whose tasks this scheduler returned.",
            registry=r,
        )
        self.reaped_tasks = Counter(
            "taskscale_scheduler_reaped_tasks_total",
            "In-flight tasks of dead workers returned to the head of their queues.",
            registry=r,
        )
        self.queued_repairs = Counter(
            "taskscale_scheduler_queued_repairs_total",
            "Types whose QUEUED count this scheduler's recount found off their "
            "ready lists' length and fixed (0 while every producer counts).",
            registry=r,
        )
        self.last_beat = Gauge(
            "taskscale_scheduler_heartbeat_timestamp_seconds",
            "Unix time of this scheduler's last successful heartbeat.",
            registry=r,
        )
        self.alive = Gauge(
            "taskscale_scheduler_alive_schedulers",
            "Schedulers (this one included) with a live heartbeat at the last beat.",
            registry=r,
        )
        self.occurrences = Counter(
            "taskscale_scheduler_schedule_occurrences_total",
            "Occurrences of periodic schedules this scheduler enqueued (as delayed "
            "tasks); each occurrence is counted by exactly one scheduler.",
            ["schedule"],
            registry=r,
        )
        self.redis_errors = Counter(
            "taskscale_scheduler_redis_errors_total",
            "Redis calls that failed with a connection or timeout error (then retried).",
            registry=r,
        )
        self.wrong_type_keys = Counter(
            "taskscale_scheduler_wrong_type_keys_total",
            "Script calls refused because a key had the wrong type (BADKEY), by key: "
            "nothing was written, the other types go on (docs/operating.md).",
            ["key"],
            registry=r,
        )

        self.workflow_totals = Gauge(
            "taskscale_scheduler_workflows",
            "Workflows of the namespace by event since it was created ({ns}:workflows:totals): "
            "started, succeeded, failed, cancelled.",
            ["event"],
            registry=r,
        )
        self.workflows_running = Gauge(
            "taskscale_scheduler_workflows_running",
            "Workflows running now (at the last sweep).",
            registry=r,
        )
        self.steps_waiting = Gauge(
            "taskscale_scheduler_workflow_steps_waiting",
            "Steps of running workflows waiting on a parent (or a group's limit).",
            registry=r,
        )
        self.workflows_lost = Counter(
            "taskscale_scheduler_workflows_lost_total",
            "Workflows this scheduler ended as failed because a step's task was lost.",
            registry=r,
        )

    def wrong_key(self, key: str) -> None:
        """A script refused a key of the wrong type."""
        self.wrong_type_keys.labels(key).inc()

    def workflows(self, swept: SweepResult) -> None:
        """A workflow sweep: the namespace's counters, and the workflows it ended."""
        for event in ("started", "succeeded", "failed", "cancelled"):
            self.workflow_totals.labels(event).set(swept.totals.get(event, 0))
        self.workflows_running.set(swept.running)
        self.steps_waiting.set(max(0, swept.totals.get("steps_waiting", 0)))
        self.workflows_lost.inc(len(swept.ended))

    def occurrence(self, schedule: str) -> None:
        """A periodic schedule's next occurrence was materialized by this scheduler."""
        self.occurrences.labels(schedule).inc()

    def promoted(self, count: int, lateness_ms: int) -> None:
        if count > 0:
            self.promoted_tasks.inc(count)
            self.lateness.observe(max(0, lateness_ms) / 1000)

    def reaped(self, workers: int, tasks: int) -> None:
        self.reaped_workers.inc(workers)
        self.reaped_tasks.inc(tasks)

    def recounted(self, repaired: int) -> None:
        self.queued_repairs.inc(repaired)

    def beat(self, alive: int) -> None:
        """A heartbeat succeeded and counted ``alive`` schedulers."""
        self.last_beat.set(time.time())
        self.alive.set(alive)
        self.health.beat()
        self.health.set_ready(True)

    def redis_error(self) -> None:
        self.redis_errors.inc()

    def serve(self, *, port: int, host: str = METRICS_HOST) -> MetricsServer:
        """Start ``/metrics``, ``/healthz`` and ``/readyz`` on ``port`` (0: any free port)."""
        return MetricsServer(self.registry, self.health, host=host, port=port).start()
