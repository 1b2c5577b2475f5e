"""Leader election on a ``coordination.k8s.io`` Lease, so only one of several
controller replicas ever scales anything.

The protocol is client-go's: the leader writes its identity and a renew time
into the Lease every ``retry_period_s``; a candidate takes the Lease only
after it has seen the same record unchanged for ``lease_duration_s`` on its
*own* clock (so clocks need not agree), or at once when the holder released
it.  Every write is a compare-and-swap on ``resourceVersion``: two candidates
can't both win.  A leader that could not renew for ``renew_deadline_s``
(shorter than the lease duration) stops acting before anyone else may start.
On shutdown the leader releases the Lease, so the standby takes over within
one retry period instead of a whole lease duration.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskscale.controller.kube import REQUEST_TIMEOUT_S, is_transient
from taskscale.controller.metrics import ControllerMetrics

log = logging.getLogger(__name__)


def default_identity() -> str:
    """``$POD_NAME``, else host name + pid (unique per process on a machine)."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class LeaseSettings:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry period < renew deadline < lease duration")


def _micro_now() -> datetime:
    # A MicroTime must carry exactly six fractional digits, and isoformat()
    # drops them when they are all zero.
    now = datetime.now(UTC)
    return now if now.microsecond else now.replace(microsecond=1)


class LeaderElector:
    """Campaigns for one Lease; :meth:`run` calls back on gaining and losing it."""

    def __init__(
        self,
        coordination: client.CoordinationV1Api,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        settings: LeaseSettings | None = None,
        metrics: ControllerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = coordination
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.settings = settings or LeaseSettings()
        self._metrics = metrics
        self._clock = clock
        self._observed: tuple[str | None, object] | None = None  # (holder, renewTime)
        self._observed_at = 0.0
        self._last_renew: float | None = None
        self._leader = threading.Event()
        #: The last attempt reached the API (a standby is ready when it can).
        self.reachable = False

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    def wait_leader(self, timeout: float) -> bool:
        return self._leader.wait(timeout)

    # --- one attempt ----------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One compare-and-swap: True if we hold the Lease afterwards."""
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create()
        spec = lease.spec or client.V1LeaseSpec()
        record = (spec.holder_identity, spec.renew_time)
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        holder = spec.holder_identity
        if holder and holder != self.identity:
            duration = spec.lease_duration_seconds or self.settings.lease_duration_s
            if self._clock() < self._observed_at + duration:
                return False  # someone else holds a lease that has not expired
        return self._replace(lease, taking_over=holder != self.identity)

    def _create(self) -> bool:
        now = _micro_now()
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self.settings.lease_duration_s),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._api.create_namespaced_lease(
                self.namespace, lease, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status == 409:  # another candidate created it first
                return False
            raise
        return True

    def _replace(self, lease: client.V1Lease, *, taking_over: bool) -> bool:
        spec = lease.spec or client.V1LeaseSpec()
        now = _micro_now()
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = int(self.settings.lease_duration_s)
        spec.renew_time = now
        if taking_over:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        lease.spec = spec
        try:
            self._api.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status == 409:  # changed since we read it: someone else moved first
                return False
            raise
        if taking_over:
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
        return True

    def release(self) -> bool:
        """Give the Lease up if we hold it (the standby may take it at once)."""
        self._set_leader(False)
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S
            )
            spec = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                return False
            spec.holder_identity = None
            spec.lease_duration_seconds = 1
            spec.renew_time = _micro_now()
            self._api.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as exc:
            log.warning("releasing lease %s/%s failed: %s", self.namespace, self.name, exc.reason)
            self._count_error()
            return False
        log.info("released lease %s/%s", self.namespace, self.name)
        return True

    # --- the campaign ---------------------------------------------------------------------
    def run(
        self,
        stop: threading.Event,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
    ) -> None:
        """Campaign until ``stop`` is set; releases the Lease on the way out."""
        try:
            while not stop.is_set():
                self._step(on_started_leading, on_stopped_leading)
                stop.wait(self.settings.retry_period_s)
        finally:
            if self.is_leader:
                self._set_leader(False)
                on_stopped_leading()
            self.release()

    def _step(self, started: Callable[[], None], stopped: Callable[[], None]) -> None:
        try:
            held = self.try_acquire_or_renew()
            self.reachable = True
        except Exception as exc:
            self.reachable = False
            self._count_error()
            if not is_transient(exc):
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            held = None  # unknown: keep leading until the renew deadline passes
        now = self._clock()
        if held:
            self._last_renew = now
            if not self.is_leader:
                self._set_leader(True)
                started()
            return
        deadline_passed = (
            self._last_renew is None or now - self._last_renew > self.settings.renew_deadline_s
        )
        if self.is_leader and (held is False or deadline_passed):
            log.warning("lost lease %s/%s", self.namespace, self.name)
            self._set_leader(False)
            stopped()

    def _set_leader(self, leader: bool) -> None:
        if leader:
            self._leader.set()
        else:
            self._leader.clear()
        if self._metrics is not None:
            self._metrics.leader.set(1 if leader else 0)

    def _count_error(self) -> None:
        if self._metrics is not None:
            self._metrics.count_api_error("lease")
