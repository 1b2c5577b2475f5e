"""``/metrics``, ``/healthz`` and ``/readyz`` on one port, for the worker and
the controller.

The controller's main loop beats a :class:`HealthState`; a worker beats it
from every successful heartbeat (its lease renewal), is ready while that
lease is fresh and not stopping, and is alive while heartbeats succeed within
a minute (or three leases): a worker that cannot renew its lease for that
long is restarted by the kubelet, losing nothing (its tasks are in Redis and
the reaper returns what it held).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from taskscale.listening import open_listener

#: Where a metrics port listens unless told: every IPv4 address (Prometheus
#: scrapes a pod from another one).
METRICS_HOST = "0.0.0.0"


class HealthState:
    """What ``/healthz`` and ``/readyz`` answer: alive while the main loop
    beats (within ``stale_after_s``), ready once :meth:`set_ready` said so and
    the last beat is younger than ``ready_stale_after_s``."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        stale_after_s: float = 60.0,
        ready_stale_after_s: float | None = None,
    ) -> None:
        self._clock = clock
        self._stale_after_s = stale_after_s
        self._ready_stale_after_s = (
            stale_after_s if ready_stale_after_s is None else ready_stale_after_s
        )
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
            return self._ready and self._clock() - self._beat < self._ready_stale_after_s


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one port, in a daemon thread;
    :class:`~taskscale.listening.ListenError` when the port can't be opened."""

    def __init__(
        self, registry: CollectorRegistry, health: HealthState, *, host: str, port: int
    ) -> None:
        handler = _handler_class(registry, health)
        listener = open_listener(host, port)  # ListenError: one line, no traceback
        self._server = ThreadingHTTPServer(listener.getsockname()[:2], handler, False)
        self._server.socket.close()
        self._server.socket = listener  # bound here, so an IPv6 host works too
        self._server.server_address = listener.getsockname()
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
