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
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
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
            for gauge in (*self._observed.values(), self.observed_idle_seconds):
                _remove(gauge, scaler, name)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The current value of one series (tests and the demo read it)."""
        return self.registry.get_sample_value(name, labels or {})


def _known(value: str, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


def _remove(metric: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)


class HealthState:
    """What ``/healthz`` and ``/readyz`` answer: alive while the main loop
    beats, ready once the controller has talked to the API server."""

    def __init__(self, *, clock: Callable[[], float], stale_after_s: float = 60.0) -> None:
        self._clock = clock
        self._stale_after_s = stale_after_s
        self._beat = clock()
        self._ready = False
        self._lock = threading.Lock()

    def beat(self) -> None:
        with self._lock:
            self._beat = self._clock()

    def set_ready(self, ready: bool) -> None:
        with self._lock:
            self._ready = ready

    @property
    def alive(self) -> bool:
        with self._lock:
            return self._clock() - self._beat < self._stale_after_s

    @property
    def ready(self) -> bool:
        with self._lock:
            return self._ready and self._clock() - self._beat < self._stale_after_s


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one port, in a daemon thread."""

    def __init__(
        self, metrics: ControllerMetrics, health: HealthState, *, host: str, port: int
    ) -> None:
        handler = _handler_class(metrics.registry, health)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-server", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler_class(
    registry: CollectorRegistry, health: HealthState
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = health.alive
                self._send(200 if ok else 503, b"ok\n" if ok else b"stalled\n")
            elif path == "/readyz":
                ok = health.ready
                self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
            else:
                self._send(404, b"not found\n")

        def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the controller's log

    return Handler
