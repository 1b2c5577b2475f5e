"""One machine, no Kubernetes: a :class:`LocalPool` scaled by the reconciler,
as one call that owns the whole lifetime.

Why it exists: wiring a Reconciler to a LocalPool by hand (docs/operating.md,
"Without Kubernetes: one VM", before issue 26) left two things out.  A
SIGTERM -- systemd stopping the service, ``kill`` -- ended the process before
any ``finally`` ran, and the workers, in sessions of their own, kept running
as orphans; and nothing recorded the pool's decisions, so it never appeared
on the console's Scaling page.  :func:`run_local` does both: stop signals
end the loop and every worker is stopped (SIGTERM, drained, killed after the
drain timeout) before it returns; and each pass goes through a
:class:`DecisionLog` into the pool's Redis, as the controller's passes do.
:func:`start_local_reconciler` is the wiring itself, which ``taskscale
demo`` shares.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from taskscale.controller.config import DEFAULT_POLL_INTERVAL_S, RedisRef, ScalerConfig
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.local import LocalPool, LocalPoolSettings
from taskscale.controller.outcome import LoggingReporter, Reporter
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings
from taskscale.controller.redis_clients import RedisClients
from taskscale.controller.types import ScalingPolicy
from taskscale.signals import on_stop_signals

log = logging.getLogger(__name__)

#: The namespace part of a local scaler's key (``local/NAME`` on the Scaling page).
LOCAL_NAMESPACE = "local"


@dataclass(frozen=True)
class LocalScaler:
    """One local pool and the policy that sizes it."""

    pool: LocalPoolSettings
    policy: ScalingPolicy
    #: Its name on the Scaling page, in logs and metrics (``local/<name>``).
    name: str = "local-pool"
    poll_interval_s: float = DEFAULT_POLL_INTERVAL_S
    #: Seconds :func:`run_local` waits for draining workers before killing them.
    stop_timeout_s: float = 30.0

    def config(self) -> ScalerConfig:
        return ScalerConfig(
            name=self.name,
            namespace=LOCAL_NAMESPACE,
            target=self.pool.name_prefix,
            redis=RedisRef(url=self.pool.redis_url, key_namespace=self.pool.namespace),
            policy=self.policy,
            poll_interval_s=self.poll_interval_s,
        )


@dataclass
class LocalReconciler:
    """A reconciler scaling one pool, its decisions recorded for the console."""

    reconciler: Reconciler
    decisions: DecisionLog
    pool: LocalPool

    def close(self) -> None:
        """Stop the loop and close its clients (the pool's workers are the caller's)."""
        self.reconciler.close()
        self.decisions.close()


def start_local_reconciler(
    scaler: LocalScaler,
    pool: LocalPool,
    *,
    reporter: Reporter | None = None,
    settings: ReconcilerSettings | None = None,
) -> LocalReconciler:
    """A reconciler with ``pool`` registered under ``scaler``'s policy; every
    pass is handed to ``reporter`` (default: logged) and recorded in the pool's
    Redis for the Scaling page.  Call ``.reconciler.run()`` to loop."""
    settings = settings or ReconcilerSettings()
    clients = RedisClients(timeout_s=settings.redis_timeout_s)  # one for both
    decisions = DecisionLog(reporter or LoggingReporter(), clients=clients)
    reconciler = Reconciler(reporter=decisions, settings=settings, clients=clients)
    config = scaler.config()
    decisions.bind(config, scaler.pool.redis_url)
    reconciler.upsert(config, actuator=pool, redis_url=scaler.pool.redis_url)
    return LocalReconciler(reconciler, decisions, pool)


def run_local(scaler: LocalScaler, *, stop: threading.Event | None = None) -> None:
    """Scale a pool of ``taskscale worker`` processes on this machine until
    SIGTERM or SIGINT (or ``stop`` is set), then stop every worker -- drained,
    or killed past ``stop_timeout_s`` -- before returning.

    Called from the main thread it handles SIGTERM and SIGINT itself; from
    another thread only ``stop`` ends it (signals can only be caught in the
    main thread)."""
    stop = stop or threading.Event()
    pool = LocalPool(scaler.pool)
    local = start_local_reconciler(scaler, pool)

    def on_signal(signum: int) -> None:  # on a thread (taskscale.signals)
        log.info("local pool %s: signal %d, stopping its workers", scaler.name, signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        on_stop_signals(on_signal)
    runner = threading.Thread(target=local.reconciler.run, name="local-reconciler", daemon=True)
    try:
        runner.start()
        while not stop.wait(1.0):
            if not runner.is_alive():  # the loop itself failed: stop the workers too
                log.error("local pool %s: the reconcile loop ended", scaler.name)
                break
    finally:
        local.close()
        runner.join(10)
        pool.stop_all(scaler.stop_timeout_s)
