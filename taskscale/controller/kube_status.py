"""What the controller tells people about a TaskScaler: its status
(patched only when something other than the idle clock changed), its
conditions, and Events on every scale and when a problem starts or ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskscale.controller.kube_client import (
    FIELD_MANAGER,
    GROUP,
    KIND,
    PLURAL,
    REQUEST_TIMEOUT_S,
    VERSION,
    api_call,
    utc_now,
)
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import PassOutcome
from taskscale.controller.status_doc import (
    ConditionType,
    EventReason,
    build_status,
    condition_of,
    conditions_for,
    make_condition,
    merge_conditions,
    observations_status,
    ready_reason,
    status_differs,
)
from taskscale.logs import redact
from taskscale.retrying import RetrySettings

#: The logger of the controller's Kubernetes side (kube.py shares the name).
log = logging.getLogger("taskscale.controller.kube")

# --- the reporter ----------------------------------------------------------------


@dataclass
class _Known:
    """What the reporter knows of one TaskScaler: identity and last status."""

    uid: str
    generation: int
    status: dict[str, Any]
    warned: dict[str, float] = field(default_factory=dict)  # reason -> time of last Event


class KubeReporter:
    """Writes outcomes to TaskScaler status (only on change) and Events."""

    #: A problem that persists is posted again at most this often.
    REPEAT_WARNING_S = 300.0

    def __init__(
        self,
        *,
        custom: client.CustomObjectsApi,
        core: client.CoreV1Api,
        metrics: ControllerMetrics,
        identity: str,
        retry: RetrySettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._custom = custom
        self._core = core
        self._metrics = metrics
        self._identity = identity
        self._retry = retry or RetrySettings()
        self._clock = clock
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()

    def seed(self, obj: Mapping[str, Any]) -> None:
        """Learn a TaskScaler's uid, generation and current status from the API."""
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        status = dict(obj.get("status") or {})
        with self._lock:
            known = self._known.get(key)
            warned = known.warned if known is not None and known.uid == meta.get("uid") else {}
            self._known[key] = _Known(
                str(meta.get("uid", "")), int(meta.get("generation") or 0), status, warned
            )

    def forget(self, key: str) -> None:
        with self._lock:
            self._known.pop(key, None)

    def report(self, outcome: PassOutcome) -> None:
        config = outcome.config
        with self._lock:
            known = self._known.get(config.key)
        if known is None:
            return  # deleted meanwhile
        status = build_status(outcome, known.status, now=self._clock())
        self._events(outcome, known, status)
        self._write_status(config.namespace, config.name, known, status)

    def report_invalid(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """A TaskScaler the controller can't act on: Ready=False, a Warning Event."""
        message = redact(message)  # a URL in it never shows its password
        self.seed(obj)
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        with self._lock:
            known = self._known[f"{namespace}/{name}"]
        status = dict(known.status)
        now = self._clock()
        status["observedGeneration"] = known.generation
        status["reasonCode"], status["reason"] = reason, message[:1024]
        status["conditions"] = merge_conditions(
            known.status.get("conditions") or [],
            [make_condition(ConditionType.READY, "False", reason, message)],
            now=now,
            generation=known.generation,
        )
        if ready_reason(known.status) != reason:
            self._post_event(namespace, name, known, "Warning", reason, message)
        self._write_status(namespace, name, known, status)

    # --- status ------------------------------------------------------------------
    def _write_status(
        self, namespace: str, name: str, known: _Known, status: dict[str, Any]
    ) -> None:
        if not status_differs(status, known.status):
            return
        try:
            api_call(
                lambda: self._custom.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    {"status": status},
                    field_manager=FIELD_MANAGER,
                    _request_timeout=REQUEST_TIMEOUT_S,
                ),
                operation="patch_status",
                metrics=self._metrics,
                retry=self._retry,
                scaler=f"{namespace}/{name}",
            )
        except ApiException as exc:
            if exc.status == 404:
                return  # deleted meanwhile
            raise
        known.status = status

    # --- Events -------------------------------------------------------------------
    def _events(self, outcome: PassOutcome, known: _Known, status: dict[str, Any]) -> None:
        config, decision = outcome.config, outcome.decision
        self._pause_event(outcome, known)
        self._rollout_event(outcome, known, status)
        if outcome.scaled and decision is not None and outcome.current is not None:
            up = decision.desired > outcome.current
            reason = EventReason.SCALED_UP if up else EventReason.SCALED_DOWN
            if outcome.jobs is not None:  # Job mode: a batch of Jobs created
                reason = EventReason.JOBS_CREATED
            self._post_event(
                config.namespace, config.name, known, "Normal", reason, decision.reason
            )
        self._threads_events(config.namespace, config.name, known, status)
        self._drain_events(outcome, known)
        previous = ready_reason(known.status)
        if outcome.problem is not None:
            last = known.warned.get(outcome.problem)
            now = self._clock()
            if previous != outcome.problem or last is None or now - last > self.REPEAT_WARNING_S:
                known.warned[outcome.problem] = now
                self._post_event(
                    config.namespace,
                    config.name,
                    known,
                    "Warning",
                    outcome.problem,
                    outcome.message,
                )
        elif previous not in (None, "Reconciled"):
            known.warned.clear()
            self._post_event(
                config.namespace,
                config.name,
                known,
                "Normal",
                EventReason.RECOVERED,
                f"reconciling again (was {previous})",
            )

    def _threads_events(
        self, namespace: str, name: str, known: _Known, status: Mapping[str, Any]
    ) -> None:
        """A Warning when ThreadsMatch turns False, a Normal Event when it turns True again."""
        before = condition_of(known.status, ConditionType.THREADS_MATCH)
        now = condition_of(status, ConditionType.THREADS_MATCH)
        if now is None or (before or {}).get("status") == now.get("status"):
            return
        if now.get("status") == "False":
            self._post_event(
                namespace, name, known, "Warning", EventReason.THREADS_MISMATCH, now["message"]
            )
        elif before is not None and before.get("status") == "False":
            self._post_event(
                namespace, name, known, "Normal", EventReason.THREADS_MATCH, now["message"]
            )

    def _rollout_event(
        self, outcome: PassOutcome, known: _Known, status: Mapping[str, Any]
    ) -> None:
        """An Event when a scale-down starts waiting for a rollout, one when it stops."""
        held, was = bool(status.get("rolloutHold")), bool(known.status.get("rolloutHold"))
        if held == was or outcome.decision is None:
            return
        config = outcome.config
        if held:
            reason, message = EventReason.ROLLOUT_HOLD, outcome.decision.reason
        else:
            reason, message = (
                EventReason.ROLLOUT_HOLD_ENDED,
                "the rollout ended: " + (outcome.decision.reason),
            )
        self._post_event(config.namespace, config.name, known, "Normal", reason, message)

    def _drain_events(self, outcome: PassOutcome, known: _Known) -> None:
        """An Event when a pod is flagged for draining, one when its drain completes."""
        protection, config = outcome.protection, outcome.config
        if protection is None:
            return
        for pod in protection.newly_draining:
            node = protection.draining.get(pod, "?")
            message = (
                f"pod {pod}: node {node} is cordoned or tainted for removal; its workers "
                "claim nothing now and finish what they run"
            )
            self._post_event(
                config.namespace, config.name, known, "Normal", EventReason.POD_DRAINING, message
            )
        for pod, waited in sorted(protection.drained.items()):
            message = f"pod {pod}: its tasks ended after {waited:.0f} s of drain; it may be evicted"
            self._post_event(
                config.namespace, config.name, known, "Normal", EventReason.POD_DRAINED, message
            )

    def _pause_event(self, outcome: PassOutcome, known: _Known) -> None:
        """An Event when a pause annotation appears or goes away."""
        config = outcome.config
        was_paused = any(
            c.get("type") == ConditionType.PAUSED and c.get("status") == "True"
            for c in known.status.get("conditions") or []
        )
        if (config.pause is not None) == was_paused:
            return
        if config.pause is not None:
            reason, message = EventReason.PAUSED, config.pause.describe()
        else:
            reason, message = EventReason.RESUMED, "the pause annotations are gone: scaling again"
        self._post_event(config.namespace, config.name, known, "Normal", reason, message)

    def _post_event(
        self, namespace: str, name: str, known: _Known, kind: str, reason: str, message: str
    ) -> None:
        now = utc_now()
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}.", namespace=namespace),
            involved_object=client.V1ObjectReference(
                api_version=f"{GROUP}/{VERSION}",
                kind=KIND,
                name=name,
                namespace=namespace,
                uid=known.uid or None,
            ),
            reason=reason,
            message=redact(message)[:1024],
            type=kind,
            count=1,
            first_timestamp=now,
            last_timestamp=now,
            source=client.V1EventSource(component=FIELD_MANAGER),
            reporting_component=f"{GROUP}/controller",
            reporting_instance=self._identity,
        )
        try:
            api_call(
                lambda: self._core.create_namespaced_event(
                    namespace, event, _request_timeout=REQUEST_TIMEOUT_S
                ),
                operation="create_event",
                metrics=self._metrics,
                retry=self._retry,
                scaler=f"{namespace}/{name}",
            )
        except ApiException as exc:
            log.warning("event %s on %s/%s not posted: %s", reason, namespace, name, exc.reason)


__all__ = [
    "ConditionType",
    "EventReason",
    "KubeReporter",
    "build_status",
    "conditions_for",
    "merge_conditions",
    "observations_status",
    "status_differs",
]
