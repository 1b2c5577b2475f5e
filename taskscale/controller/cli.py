"""``taskscale controller``.

``controller`` runs the Kubernetes operator: it serves metrics and health on
``--metrics-port`` at once, then (optionally after winning the leader Lease)
watches TaskScalers and reconciles them until SIGTERM, when it stops acting,
releases the Lease and exits 0.  The flags are the ones the Helm chart uses;
change them only together with charts/taskscale.

``demo`` belongs to taskscale.demo.run; it is imported lazily so the
controller command works even where the demo's extras are missing.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any

from taskscale.cli.common import port
from taskscale.controller.metrics import ControllerMetrics
from taskscale.health import METRICS_HOST, HealthState, MetricsServer
from taskscale.listening import ListenError
from taskscale.logs import add_logging_arguments, configure_logging
from taskscale.signals import on_stop_signals

log = logging.getLogger("taskscale.controller")

#: The Lease the controllers elect a leader on, unless told (the chart sets it).
DEFAULT_LEASE_NAME = "taskscale-controller"


def add_parser(subparsers: Any) -> None:
    """Add ``controller`` to the ``taskscale`` CLI."""
    p = subparsers.add_parser(
        "controller",
        help="run the Kubernetes controller (scales Deployments from TaskScalers)",
        description="Watch TaskScaler objects and scale their Deployments from Redis queues.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then in-cluster)")
    p.add_argument("--watch-namespace", help="only this namespace (default: all namespaces)")
    p.add_argument(
        "--metrics-port", type=port, default=9090, help="port of /metrics, /healthz, /readyz"
    )
    p.add_argument(
        "--metrics-host",
        default=METRICS_HOST,
        help=f"address the metrics port binds to (default {METRICS_HOST}: every address)",
    )
    p.add_argument("--leader-elect", action="store_true", help="act only while holding the Lease")
    p.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE") or "default",
        help="namespace of the Lease (default: $POD_NAMESPACE or default)",
    )
    p.add_argument(
        "--leader-election-id",
        default=DEFAULT_LEASE_NAME,
        help=f"Lease name (default {DEFAULT_LEASE_NAME})",
    )
    add_logging_arguments(p)
    p.set_defaults(func=run_controller)


def run_controller(args: argparse.Namespace) -> int:
    configure_logging(args)
    # Imported here: `taskscale --help` must not need the Kubernetes client.
    from kubernetes import client

    from taskscale.controller.kube import ControllerSettings, KubeController
    from taskscale.controller.kube_client import KubeConfigError, load_api_client
    from taskscale.controller.leader import LeaderElector, default_identity

    try:
        api = load_api_client(args.kubeconfig)
    except KubeConfigError as exc:
        print(f"taskscale controller: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    on_stop_signals(lambda _signum: stop.set())  # on a thread: Event.set takes a lock
    metrics = ControllerMetrics()
    health = HealthState(clock=time.monotonic)
    try:
        server = MetricsServer(
            metrics.registry, health, host=args.metrics_host, port=args.metrics_port
        ).start()
    except ListenError as exc:
        print(f"taskscale controller: {exc}", file=sys.stderr)
        api.close()  # type: ignore[no-untyped-call]
        return exc.exit_code
    identity = default_identity()
    settings = ControllerSettings(watch_namespace=args.watch_namespace)
    running: list[KubeController] = []

    def start_leading() -> None:
        log.info("leading as %s: reconciling TaskScalers", identity)
        controller = KubeController(
            api,
            metrics=metrics,
            identity=identity,
            settings=settings,
            heartbeat=health.beat,
            on_synced=lambda: health.set_ready(True),
        )
        running.append(controller.start())

    def stop_leading() -> None:
        log.info("stopped leading: standing by")
        while running:
            running.pop().stop()

    try:
        if not args.leader_elect:
            metrics.leader.set(1)
            start_leading()
            _wait(stop, health, running)
            stop_leading()
            return 0
        elector = LeaderElector(
            client.CoordinationV1Api(api),
            namespace=args.leader_election_namespace,
            name=args.leader_election_id,
            identity=identity,
            metrics=metrics,
        )
        campaign = threading.Thread(
            target=elector.run,
            args=(stop,),
            kwargs={"on_started_leading": start_leading, "on_stopped_leading": stop_leading},
            name="leader-election",
        )
        campaign.start()
        _wait(stop, health, running, ready_when=lambda: elector.reachable)
        campaign.join(30)
        return 0
    finally:
        server.stop()
        api.close()  # type: ignore[no-untyped-call]


def _wait(
    stop: threading.Event,
    health: HealthState,
    running: list[Any],
    *,
    ready_when: Any = None,
) -> None:
    """Until SIGTERM: keep /healthz alive while no reconciler beats for it
    (a standby), and mark a standby ready once it has reached the API."""
    while not stop.wait(1.0):
        if not running:
            health.beat()
            if ready_when is not None:
                health.set_ready(bool(ready_when()))
