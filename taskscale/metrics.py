"""Prometheus metrics of one worker process, served on ``--metrics-port``.

Names follow the project's convention: one ``taskscale_worker_`` prefix,
base units, ``_total`` counters; label values are task types (a small, known
set) and outcomes, never task ids.  Each :class:`WorkerMetrics` has its own
registry so several workers in one process (tests) do not collide.
"""

from __future__ import annotations

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)

from taskscale.health import METRICS_HOST

OUTCOMES = ("completed", "retried", "dead")
_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 3600)
_WAIT_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1, 5, 10, 60, 300, 3600)


class WorkerMetrics:
    """Tasks by type and outcome, run time, queue wait, busy and total slots."""

    def __init__(self, *, types: tuple[str, ...], threads: int) -> None:
        self.registry = CollectorRegistry()
        register_process_metrics(self.registry, "worker")
        self.tasks = Counter(
            "taskscale_worker_tasks_total",
            "Task runs finished, by type and outcome (completed, retried, dead).",
            ["type", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "taskscale_worker_task_duration_seconds",
            "Run time of task functions.",
            ["type"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.queue_wait = Histogram(
            "taskscale_worker_queue_wait_seconds",
            "Time from enqueue (or due time) to claim, on the Redis clock.",
            ["type"],
            buckets=_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.busy = Gauge(
            "taskscale_worker_busy_threads",
            "Slots running a task now: threads, plus async slots (of async def tasks).",
            registry=self.registry,
        )
        self.threads = Gauge(
            "taskscale_worker_threads",
            "Slots the worker runs tasks on: its threads (if it serves plain functions) "
            "plus its async slots (if it serves async def ones), as busy_threads counts them.",
            registry=self.registry,
        )
        self.async_slots = Gauge(
            "taskscale_worker_async_slots",
            "Of taskscale_worker_threads, the event loop's slots for async def tasks "
            "(0: the worker serves none).",
            registry=self.registry,
        )
        self.timeouts = Counter(
            "taskscale_worker_task_timeouts_total",
            "Task runs failed because they ran past their timeout (also counted in tasks_total).",
            ["type"],
            registry=self.registry,
        )
        self.cancels_seen = Counter(
            "taskscale_worker_cancels_seen_total",
            "Runs whose task function saw current_task().cancelled turn true "
            "(a cancel of a running task, noticed; once per run).",
            ["type"],
            registry=self.registry,
        )
        self.redis_errors = Counter(
            "taskscale_worker_redis_errors_total",
            "Redis calls that failed with a connection or timeout error (then retried).",
            registry=self.registry,
        )
        self.wrong_type_keys = Counter(
            "taskscale_worker_wrong_type_keys_total",
            "Script calls refused because a key had the wrong type (BADKEY), by key: "
            "nothing was written, the key's task type is held back (docs/operating.md).",
            ["key"],
            registry=self.registry,
        )
        self.set_pools(threads=threads, async_slots=0)  # the worker says which pools it runs
        # Labelled children are looked up once per type, not once per task:
        # labels() validates and locks on every call, which cost a no-op
        # worker ~15 % of its CPU (bench/runtime_bench.py --profile).
        self._finished: dict[tuple[str, str], Counter] = {}
        self._duration: dict[str, Histogram] = {}
        self._wait: dict[str, Histogram] = {}
        for task_type in types:  # series exist from the start, at 0
            for outcome in OUTCOMES:
                self._counter(task_type, outcome)
            self._histograms(task_type)
            self.timeouts.labels(task_type)
            self.cancels_seen.labels(task_type)

    def _counter(self, task_type: str, outcome: str) -> Counter:
        child = self._finished.get((task_type, outcome))
        if child is None:
            child = self._finished[(task_type, outcome)] = self.tasks.labels(task_type, outcome)
        return child

    def _histograms(self, task_type: str) -> tuple[Histogram, Histogram]:
        duration = self._duration.get(task_type)
        if duration is None:
            duration = self._duration[task_type] = self.duration.labels(task_type)
            self._wait[task_type] = self.queue_wait.labels(task_type)
        return duration, self._wait[task_type]

    def set_pools(self, *, threads: int, async_slots: int) -> None:
        """The sizes of the worker's slot pools (0 for a pool it does not run)."""
        self.threads.set(threads + async_slots)
        self.async_slots.set(async_slots)

    def task_finished(self, task_type: str, outcome: str, duration_s: float) -> None:
        self._counter(task_type, outcome).inc()
        self._histograms(task_type)[0].observe(duration_s)

    def cancel_seen(self, task_type: str) -> None:
        self.cancels_seen.labels(task_type).inc()

    def task_claimed(self, task_type: str, wait_s: float) -> None:
        self._histograms(task_type)[1].observe(max(0.0, wait_s))

    def serve(self, port: int, *, addr: str = METRICS_HOST) -> None:
        """Expose ``/metrics`` on ``port`` (a daemon thread)."""
        start_http_server(port, addr=addr, registry=self.registry)


def register_process_metrics(registry: CollectorRegistry, component: str) -> None:
    """``process_*`` (CPU, memory, open fds), ``python_*`` (version, GC) and
    ``taskscale_build_info{version, component}`` on ``registry``."""
    from taskscale import __version__

    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    Gauge(
        "taskscale_build_info",
        "Always 1; the labels say which taskscale version this process runs.",
        ["version", "component"],
        registry=registry,
    ).labels(version=__version__, component=component).set(1)
