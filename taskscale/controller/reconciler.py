"""The reconcile loop: observe, decide, apply, report -- for every scaler.

Level-triggered, in the manner of kubernetes/sample-controller: every pass
starts from what Redis and the target say *now*, never from the event that
woke it, so a missed wake-up or a restart costs at most one poll interval.
What wakes a pass is either a scaler's poll interval, or a demand signal from
Redis (the enqueue script publishes a type when its queue goes from empty to
non-empty) for a scaler whose target sits at zero replicas -- so
scale-from-zero waits for one round trip, not for the next poll.

Scalers that share a Redis and key namespace form a *group*: the passes that
are due together read Redis in one :meth:`Observer.observe` round trip, and
one :class:`DemandListener` serves the whole group.

This module owns *when* passes run: registration of scalers and their
groups, the demand wake, the run loop and the exponential backoff after a
failed pass.  *What* a pass does -- observe, decide, act, report, with
failures contained per scaler -- is reconcile_pass.py; the per-scaler and
per-group state is scaler_state.py; the outcome and reporter types are
outcome.py, the short in-pass retries taskscale/retrying.py (all re-exported
here).

The reconciler knows nothing about Kubernetes: the actuator and the reporter
are injected, so ``taskscale demo`` runs the same loop with a local process
pool and a console reporter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from taskscale.backoff import equal_jitter, exponential
from taskscale.controller.config import ScalerConfig
from taskscale.controller.history import History
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import (
    LoggingReporter,
    PassOutcome,
    Problem,
    Reporter,
    TargetNotFound,
)
from taskscale.controller.reconcile_pass import ReconcilePass
from taskscale.controller.redis_clients import DEFAULT_TIMEOUT_S, RedisClients
from taskscale.controller.scaler_state import (
    GroupKey,
    ScalerGroup,
    ScalerState,
    close_group,
    open_group,
)
from taskscale.controller.target_owner import shadowed, target_of
from taskscale.controller.types import Actuator
from taskscale.retrying import RetrySettings, call_with_retries

__all__ = [
    "LoggingReporter",
    "PassOutcome",
    "Problem",
    "Reconciler",
    "ReconcilerSettings",
    "Reporter",
    "RetrySettings",
    "TargetNotFound",
    "call_with_retries",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcilerSettings:
    redis: RetrySettings = field(default_factory=RetrySettings)
    #: Socket timeouts of the Redis clients the reconciler opens.
    redis_timeout_s: float = DEFAULT_TIMEOUT_S
    #: After a failed pass, the scaler is retried after a delay that starts
    #: here and doubles per consecutive failure (with jitter), up to max.
    error_backoff_initial_s: float = 1.0
    error_backoff_max_s: float = 30.0
    #: Longest sleep of the run loop (its heartbeat period).
    max_sleep_s: float = 1.0
    #: Subscribe to demand signals (off: poll only, e.g. to measure the difference).
    listen_for_demand: bool = True


class Reconciler:
    """Keeps every registered scaler's target at the size its policy asks for.

    Register scalers with :meth:`upsert` (again whenever the spec changes),
    drop them with :meth:`remove`; :meth:`run` loops until :meth:`stop`.
    Thread-safe: the Kubernetes watcher upserts from its own thread.
    """

    def __init__(
        self,
        *,
        reporter: Reporter | None = None,
        metrics: ControllerMetrics | None = None,
        settings: ReconcilerSettings | None = None,
        clock: Callable[[], float] = time.time,
        heartbeat: Callable[[], None] | None = None,
        clients: RedisClients | None = None,
    ) -> None:
        self.metrics = metrics or ControllerMetrics()
        self._settings = settings or ReconcilerSettings()
        #: One client per Redis URL, shared with the decision log when given.
        self._clients = clients or RedisClients(timeout_s=self._settings.redis_timeout_s)
        self._heartbeat = heartbeat
        self._lock = threading.Lock()
        self._scalers: dict[str, ScalerState] = {}
        self._groups: dict[GroupKey, ScalerGroup] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pass = ReconcilePass(
            reporter=reporter or LoggingReporter(),
            metrics=self.metrics,
            redis_retries=self._settings.redis,
            clock=clock,
            schedule=self._schedule,
        )

    # --- registration ----------------------------------------------------------
    def upsert(self, config: ScalerConfig, *, actuator: Actuator, redis_url: str) -> None:
        """Add a scaler or update its config; a changed config is reconciled at once.
        Ignored once the reconciler is stopped (a late watch event)."""
        if self._stopping.is_set():
            return
        group_key = (redis_url, config.redis.key_namespace)
        stale: ScalerGroup | None = None
        with self._lock:
            scaler = self._scalers.get(config.key)
            if scaler is None:
                history = History.for_policy(config.policy)
                scaler = ScalerState(config, actuator, group_key, history)
                self._scalers[config.key] = scaler
            elif scaler.config == config and scaler.group == group_key:
                scaler.actuator = actuator
                return
            else:
                self._target_freed(scaler.config)
                stale = self._leave_group(scaler)
                if scaler.config.policy != config.policy:
                    scaler.history = History.for_policy(config.policy)
                scaler.config, scaler.actuator, scaler.group = config, actuator, group_key
                scaler.next_due = 0.0
            self._join_group(scaler)
            self.metrics.scalers.set(len(self._scalers))
            self.metrics.add_scaler(config.key, max_replicas=config.policy.max_replicas)
        if stale is not None:
            close_group(stale, self._clients)
        self._wake.set()

    def remove(self, key: str) -> None:
        """Stop reconciling a scaler (its target keeps its current size)."""
        with self._lock:
            scaler = self._scalers.pop(key, None)
            stale = self._leave_group(scaler) if scaler is not None else None
            self.metrics.scalers.set(len(self._scalers))
            if scaler is not None:
                self._target_freed(scaler.config)
        if scaler is not None:
            self.metrics.forget_scaler(key, scaler.config.policy.type_names())
        if stale is not None:
            close_group(stale, self._clients)

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._scalers)

    def _target_freed(self, config: ScalerConfig) -> None:
        """``config`` leaves its target: a scaler it kept off that target
        (target_owner.py) has its pass now, not after its backoff."""
        target = target_of(config)
        if target is None:
            return
        for other in self._scalers.values():
            if other.config.key != config.key and target_of(other.config) == target:
                other.next_due = 0.0

    def _join_group(self, scaler: ScalerState) -> None:
        group = self._groups.get(scaler.group)
        if group is None:
            group = self._open_group(scaler.group)
            self._groups[scaler.group] = group
        group.members.add(scaler.config.key)

    def _leave_group(self, scaler: ScalerState) -> ScalerGroup | None:
        group = self._groups.get(scaler.group)
        if group is None:
            return None
        group.members.discard(scaler.config.key)
        if group.members:
            return None
        del self._groups[scaler.group]
        return group

    def _open_group(self, group_key: GroupKey) -> ScalerGroup:
        listen = self._settings.listen_for_demand
        return open_group(
            group_key,
            clients=self._clients,
            on_demand=(lambda task_type: self._on_demand(group_key, task_type)) if listen else None,
            on_listener_error=lambda exc: self._count_demand_error(group_key),
        )

    def _count_demand_error(self, group_key: GroupKey) -> None:
        """The group's demand listener failed: count it for each scaler it serves."""
        with self._lock:
            group = self._groups.get(group_key)
            members = tuple(group.members) if group is not None else ()
        self.metrics.count_redis_error("demand", *members)

    # --- waking ------------------------------------------------------------------
    def _on_demand(self, group_key: GroupKey, task_type: str) -> None:
        """A queue of ``task_type`` went non-empty: reconcile at once every scaler
        of this Redis serving it whose target is (or may be) at zero."""
        woke = False
        with self._lock:
            for scaler in self._scalers.values():
                if (
                    scaler.group == group_key
                    and scaler.last_current in (0, None)
                    and task_type in scaler.config.policy.type_names()
                ):
                    scaler.next_due = 0.0
                    woke = True
        if woke:
            self._wake.set()

    def wake(self, key: str | None = None) -> None:
        """Reconcile one scaler (or all) at once."""
        with self._lock:
            for name, scaler in self._scalers.items():
                if key is None or name == key:
                    scaler.next_due = 0.0
        self._wake.set()

    def wait_listening(self, timeout: float) -> bool:
        """True once every group's demand listener is subscribed (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            listeners = [g.listener for g in self._groups.values() if g.listener is not None]
        return all(
            listener.wait_subscribed(max(0.0, deadline - time.monotonic()))
            for listener in listeners
        )

    # --- the loop ------------------------------------------------------------------
    def run(self) -> None:
        """Reconcile scalers as they fall due until :meth:`stop` is called."""
        while not self._stopping.is_set():
            self._wake.clear()
            delay = self.reconcile_due()
            if self._heartbeat is not None:
                self._heartbeat()
            self._wake.wait(min(max(delay, 0.0), self._settings.max_sleep_s))

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def close(self) -> None:
        """Stop the demand listeners and close the Redis clients."""
        self.stop()
        with self._lock:
            groups = list(self._groups.values())
            self._groups.clear()
            self._scalers.clear()
        for group in groups:
            close_group(group, self._clients)

    def reconcile_due(self) -> float:
        """Run every pass that is due now; return seconds until the next one."""
        now = time.monotonic()
        with self._lock:
            due = [s for s in self._scalers.values() if s.next_due <= now]
            groups = {key: self._groups[key] for key in {s.group for s in due}}
            others = shadowed(s.config for s in self._scalers.values())
        for key, group in groups.items():
            if self._stopping.is_set():
                break
            self._pass.run(group, [s for s in due if s.group == key], others)
        with self._lock:
            next_due = min((s.next_due for s in self._scalers.values()), default=None)
        return self._settings.max_sleep_s if next_due is None else next_due - time.monotonic()

    def reconcile_now(self, key: str) -> PassOutcome:
        """One pass of one scaler, now (tests and the demo's single steps)."""
        with self._lock:
            scaler = self._scalers[key]
            group = self._groups[scaler.group]
            others = shadowed(s.config for s in self._scalers.values())
        return self._pass.run(group, [scaler], others)[0]

    def _schedule(self, scaler: ScalerState, outcome: PassOutcome) -> None:
        now = time.monotonic()
        if outcome.ok:
            scaler.failures = 0
            scaler.next_due = now + scaler.config.poll_interval_s
            return
        scaler.failures += 1
        ceiling = exponential(
            scaler.failures - 1,
            base_s=self._settings.error_backoff_initial_s,
            cap_s=self._settings.error_backoff_max_s,
        )
        # Half fixed, half jitter: scalers failing together do not retry in step.
        scaler.next_due = now + equal_jitter(ceiling)
