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
    _now,
    api_call,
    rfc3339,
)
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.outcome import PassOutcome, Problem
from taskscale.controller.retries import RetrySettings
from taskscale.controller.threads_check import check_threads
from taskscale.controller.types import Observation, ReasonCode

#: The logger of the controller's Kubernetes side (kube.py shares the name).
log = logging.getLogger("taskscale.controller.kube")


class EventReason:
    """Reasons of the Events the controller posts on a TaskScaler."""

    SCALED_UP = "ScaledUp"
    SCALED_DOWN = "ScaledDown"
    TARGET_NOT_FOUND = Problem.TARGET_NOT_FOUND
    REDIS_UNREACHABLE = Problem.REDIS_UNREACHABLE
    SCALE_FAILED = Problem.SCALE_FAILED
    INVALID_SPEC = "InvalidSpec"
    SECRET_UNAVAILABLE = "RedisSecretUnavailable"
    RECOVERED = "Recovered"
    #: tasksPerReplica differs from the threads the target's worker pods run.
    THREADS_MISMATCH = "TasksPerReplicaMismatch"
    #: ... and now they agree again.
    THREADS_MATCH = "TasksPerReplicaMatches"
    PAUSED = "Paused"
    RESUMED = "Resumed"


class ConditionType:
    READY = "Ready"
    ACTIVE = "Active"
    REDIS_REACHABLE = "RedisReachable"
    #: tasksPerReplica equals the threads per pod of the target's live workers.
    THREADS_MATCH = "ThreadsMatch"
    PAUSED = "Paused"


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
            [_condition(ConditionType.READY, "False", reason, message)],
            now=now,
            generation=known.generation,
        )
        if _ready_reason(known.status) != reason:
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
        if outcome.scaled and decision is not None and outcome.current is not None:
            up = decision.desired > outcome.current
            reason = EventReason.SCALED_UP if up else EventReason.SCALED_DOWN
            self._post_event(
                config.namespace, config.name, known, "Normal", reason, decision.reason
            )
        self._threads_events(config.namespace, config.name, known, status)
        previous = _ready_reason(known.status)
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
        before = _condition_of(known.status, ConditionType.THREADS_MATCH)
        now = _condition_of(status, ConditionType.THREADS_MATCH)
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
        now = _now()
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
            message=message[:1024],
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


def build_status(
    outcome: PassOutcome, previous: Mapping[str, Any], *, now: float
) -> dict[str, Any]:
    """The TaskScaler status after ``outcome``; fields a failed pass could not
    learn keep their previous values."""
    config = outcome.config
    status = dict(previous)
    status["observedGeneration"] = config.generation
    decision = outcome.decision
    if outcome.current is not None and decision is not None:
        status["currentReplicas"] = decision.desired if outcome.scaled else outcome.current
        status["desiredReplicas"] = decision.desired
        status["reason"] = decision.reason
        status["reasonCode"] = decision.reason_code
    if outcome.problem is not None:
        # The Reason and Message columns of `kubectl get tsc` read these two
        # fields: a failing scaler says why it fails there, not its last decision.
        status["reasonCode"] = outcome.problem
        status["reason"] = (
            f"{decision.reason} ({outcome.message})" if decision is not None else outcome.message
        )[:1024]
    if outcome.scaled:
        status["lastScaleTime"] = rfc3339(outcome.at)
    pause = config.pause
    status["paused"] = pause is not None
    status["pausedReplicas"] = pause.replicas if pause is not None else None
    if outcome.observation is not None:
        status["observations"] = observations_status(outcome.observation)
    status["conditions"] = merge_conditions(
        previous.get("conditions") or [],
        conditions_for(outcome),
        now=now,
        generation=config.generation,
    )
    return status


def observations_status(observation: Observation) -> list[dict[str, Any]]:
    out = []
    for name, t in sorted(observation.types.items()):
        busy = bool(t.queued or t.due or t.active)
        idle: float | None
        if busy:
            idle = 0.0
        elif t.idle_since is None:
            idle = None
        else:
            idle = round(max(0.0, observation.at - t.idle_since), 1)
        out.append(
            {
                "type": name,
                "queued": t.queued,
                "due": t.due,
                "upcoming": t.upcoming,
                "active": t.active,
                "idleSeconds": idle,
                "idleSince": None if t.idle_since is None else rfc3339(t.idle_since),
                "oldestWaitSeconds": _oldest_wait(t.oldest_ready_s, t.oldest_due_s),
            }
        )
    return out


def _oldest_wait(ready: float | None, due: float | None) -> float | None:
    waits = [w for w in (ready, due) if w is not None]
    return round(max(waits)) if waits else None


def conditions_for(outcome: PassOutcome) -> list[dict[str, str]]:
    """Ready, RedisReachable and Active for one outcome."""
    if outcome.redis_error is None:
        redis = _condition(ConditionType.REDIS_REACHABLE, "True", "Observed", "")
    else:
        redis = _condition(
            ConditionType.REDIS_REACHABLE, "False", Problem.REDIS_UNREACHABLE, outcome.redis_error
        )
    if outcome.problem is None:
        ready = _condition(ConditionType.READY, "True", "Reconciled", "")
    else:
        ready = _condition(ConditionType.READY, "False", outcome.problem, outcome.message)
    pause = outcome.config.pause
    paused = (
        _condition(ConditionType.PAUSED, "True", ReasonCode.PAUSED, pause.describe())
        if pause is not None
        else _condition(ConditionType.PAUSED, "False", "NotPaused", "")
    )
    return [ready, redis, _active(outcome), paused, *_threads(outcome)]


def _threads(outcome: PassOutcome) -> list[dict[str, str]]:
    """ThreadsMatch, judged from the target's live workers; nothing (the
    condition keeps its last value) while none is live, e.g. at zero replicas."""
    if outcome.observation is None:
        return []
    check = check_threads(
        deployment=outcome.config.target,
        tasks_per_replica=outcome.config.policy.tasks_per_replica,
        workers=outcome.observation.workers,
    )
    if check is None:
        return []
    if check.matches:
        return [_condition(ConditionType.THREADS_MATCH, "True", "Matches", check.message)]
    return [
        _condition(
            ConditionType.THREADS_MATCH, "False", EventReason.THREADS_MISMATCH, check.message
        )
    ]


def _active(outcome: PassOutcome) -> dict[str, str]:
    decision = outcome.decision
    if decision is None or decision.reason_code == ReasonCode.FAIL_STATIC:
        why = outcome.message or "the target could not be read"
        return _condition(ConditionType.ACTIVE, "Unknown", "Unknown", why)
    above_min = decision.desired > outcome.config.policy.min_replicas
    return _condition(
        ConditionType.ACTIVE,
        "True" if above_min else "False",
        decision.reason_code,
        decision.reason,
    )


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message[:1024]}


def merge_conditions(
    previous: list[dict[str, Any]], new: list[dict[str, str]], *, now: float, generation: int
) -> list[dict[str, Any]]:
    """Conditions in a stable order; ``lastTransitionTime`` moves only when a
    condition's status changes.  Conditions not in ``new`` are kept."""
    before = {c.get("type"): c for c in previous}
    merged: dict[str, dict[str, Any]] = {str(k): dict(v) for k, v in before.items() if k}
    for condition in new:
        old = before.get(condition["type"])
        changed = old is None or old.get("status") != condition["status"]
        stamp = rfc3339(now) if changed or old is None else old.get("lastTransitionTime")
        merged[condition["type"]] = {
            **condition,
            "lastTransitionTime": stamp or rfc3339(now),
            "observedGeneration": generation,
        }
    order = [
        ConditionType.READY,
        ConditionType.ACTIVE,
        ConditionType.REDIS_REACHABLE,
        ConditionType.THREADS_MATCH,
    ]
    return [merged[k] for k in order if k in merged] + [
        v for k, v in merged.items() if k not in order
    ]


def _ready_reason(status: Mapping[str, Any]) -> str | None:
    ready = _condition_of(status, ConditionType.READY)
    if ready is None or ready.get("reason") is None:
        return None
    return str(ready["reason"])


def _condition_of(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def status_differs(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` is worth a write over ``old`` (status updates only on change)."""
    return _comparable(new) != _comparable(old)


def _comparable(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status without the field that changes on every poll of an idle type
    (``idleSeconds``): a change of it alone does not justify a write."""
    out = dict(status)
    out["observations"] = [
        {k: v for k, v in o.items() if k not in ("idleSeconds", "oldestWaitSeconds")}
        for o in status.get("observations") or []
    ]
    return out
