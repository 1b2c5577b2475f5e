"""The Kubernetes side of the controller: TaskScalers in, scale + status + Events out.

Four parts, each small:

* :class:`TaskScalerWatcher` lists and watches TaskScaler objects (all
  namespaces or one) and hands every object it sees to a callback; the watch
  ends every ``resync_s`` and is re-listed, so Secrets are re-read and a
  missed event is repaired -- the reconciler is level-triggered anyway.
* :class:`DeploymentActuator` touches only a Deployment's ``scale``
  subresource (never its spec), and before a scale-down sets
  ``controller.kubernetes.io/pod-deletion-cost`` on the Deployment's pods from
  the worker registry's busy counts, so the ReplicaSet removes idle pods first.
* :class:`KubeReporter` turns each reconcile outcome into the TaskScaler's
  status (patched only when it changed) and Events (on every scale, and when
  a problem starts or ends).
* :class:`KubeController` wires the three to a :class:`Reconciler`.

Every API call goes through :func:`~taskscale.controller.kube_client.api_call`: tenacity retries for
transient failures (5xx, 429, connection errors), every failed attempt
counted in ``taskscale_kube_api_errors_total``.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from taskscale.controller.config import InvalidSpec, ScalerConfig, config_from_object
from taskscale.controller.kube_client import (
    DELETION_COST,
    FIELD_MANAGER,
    GROUP,
    KIND,
    PLURAL,
    REQUEST_TIMEOUT_S,
    VERSION,
    KubeConfigError,
    _now,
    _status,
    api_call,
    install_crd,
    is_transient,
    load_api_client,
    rfc3339,
)
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import (
    PassOutcome,
    Problem,
    Reconciler,
    ReconcilerSettings,
    RetrySettings,
    TargetNotFound,
)
from taskscale.controller.types import Observation, ReasonCode

__all__ = [
    "DELETION_COST",
    "FIELD_MANAGER",
    "GROUP",
    "KIND",
    "PLURAL",
    "REQUEST_TIMEOUT_S",
    "VERSION",
    "ConditionType",
    "ControllerSettings",
    "DeploymentActuator",
    "EventReason",
    "KubeConfigError",
    "KubeController",
    "KubeReporter",
    "TaskScalerWatcher",
    "api_call",
    "build_status",
    "install_crd",
    "is_transient",
    "load_api_client",
    "rfc3339",
    "status_differs",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


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


class ConditionType:
    READY = "Ready"
    ACTIVE = "Active"
    REDIS_REACHABLE = "RedisReachable"


# --- the actuator ---------------------------------------------------------------


@dataclass
class DeploymentActuator:
    """A Deployment's ``scale`` subresource (the Actuator protocol)."""

    apps: client.AppsV1Api
    core: client.CoreV1Api
    namespace: str
    name: str
    metrics: ControllerMetrics
    retry: RetrySettings = field(default_factory=RetrySettings)
    _selector: str | None = None
    _replicas: int | None = None

    def current_replicas(self) -> int:
        scale = self._call(
            "get_scale",
            lambda: self.apps.read_namespaced_deployment_scale(
                self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S
            ),
        )
        self._selector = scale.status.selector if scale.status is not None else None
        self._replicas = int(scale.spec.replicas or 0) if scale.spec is not None else 0
        return self._replicas

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        if self._replicas is None:
            self.current_replicas()
        if self._replicas is not None and replicas < self._replicas:
            self.set_deletion_costs(busy_by_pod)
        self._call(
            "patch_scale",
            lambda: self.apps.patch_namespaced_deployment_scale(
                self.name,
                self.namespace,
                {"spec": {"replicas": replicas}},
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT_S,
            ),
        )
        self._replicas = replicas

    def set_deletion_costs(self, busy_by_pod: Mapping[str, int]) -> dict[str, int]:
        """Annotate every live pod of the Deployment with its busy count (0 if
        the registry doesn't know it); returns pod -> cost.  Pods whose
        annotation already says so are not written."""
        if not self._selector:
            self.current_replicas()
        selector = self._selector or ""
        pods = self._call(
            "list_pods",
            lambda: self.core.list_namespaced_pod(
                self.namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT_S
            ),
        )
        costs: dict[str, int] = {}
        for pod in pods.items:
            meta = pod.metadata
            if meta is None or meta.name is None or meta.deletion_timestamp is not None:
                continue
            cost = int(busy_by_pod.get(meta.name, 0))
            costs[meta.name] = cost
            if (meta.annotations or {}).get(DELETION_COST) != str(cost):
                self._annotate(meta.name, cost)
        return costs

    def _annotate(self, pod: str, cost: int) -> None:
        body = {"metadata": {"annotations": {DELETION_COST: str(cost)}}}
        try:
            self._call(
                "patch_pod",
                lambda: self.core.patch_namespaced_pod(
                    pod,
                    self.namespace,
                    body,
                    field_manager=FIELD_MANAGER,
                    _request_timeout=REQUEST_TIMEOUT_S,
                ),
            )
        except ApiException as exc:
            if exc.status != 404:  # a pod that went away needs no cost
                raise

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        try:
            return api_call(fn, operation=operation, metrics=self.metrics, retry=self.retry)
        except ApiException as exc:
            if exc.status == 404 and operation in ("get_scale", "patch_scale"):
                raise TargetNotFound(f"deployment {self.namespace}/{self.name} not found") from None
            raise


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
            )
        except ApiException as exc:
            if exc.status == 404:
                return  # deleted meanwhile
            raise
        known.status = status

    # --- Events -------------------------------------------------------------------
    def _events(self, outcome: PassOutcome, known: _Known, status: dict[str, Any]) -> None:
        config, decision = outcome.config, outcome.decision
        if outcome.scaled and decision is not None and outcome.current is not None:
            up = decision.desired > outcome.current
            reason = EventReason.SCALED_UP if up else EventReason.SCALED_DOWN
            self._post_event(
                config.namespace, config.name, known, "Normal", reason, decision.reason
            )
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
    if outcome.scaled:
        status["lastScaleTime"] = rfc3339(outcome.at)
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
            }
        )
    return out


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
    return [ready, redis, _active(outcome)]


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
    order = [ConditionType.READY, ConditionType.ACTIVE, ConditionType.REDIS_REACHABLE]
    return [merged[k] for k in order if k in merged] + [
        v for k, v in merged.items() if k not in order
    ]


def _ready_reason(status: Mapping[str, Any]) -> str | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ConditionType.READY:
            return str(c.get("reason")) if c.get("reason") is not None else None
    return None


def status_differs(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` is worth a write over ``old`` (status updates only on change)."""
    return _comparable(new) != _comparable(old)


def _comparable(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status without the field that changes on every poll of an idle type
    (``idleSeconds``): a change of it alone does not justify a write."""
    out = dict(status)
    out["observations"] = [
        {k: v for k, v in o.items() if k != "idleSeconds"} for o in status.get("observations") or []
    ]
    return out


# --- the watcher -------------------------------------------------------------------


class TaskScalerWatcher:
    """Lists, then watches, TaskScalers; re-lists every ``resync_s`` or on 410."""

    def __init__(
        self,
        custom: client.CustomObjectsApi,
        *,
        namespace: str | None,
        on_object: Callable[[Mapping[str, Any]], None],
        on_delete: Callable[[str], None],
        metrics: ControllerMetrics,
        resync_s: float = 60.0,
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self._custom = custom
        self._namespace = namespace
        self._on_object = on_object
        self._on_delete = on_delete
        self._metrics = metrics
        self._resync_s = resync_s
        self._on_synced = on_synced
        self._seen: set[str] = set()
        self._watch: watch.Watch | None = None

    def run(self, stop: threading.Event) -> None:
        backoff = 0.5
        while not stop.is_set():
            try:
                version = self._list()
                backoff = 0.5
                self._watch_from(version, stop)
            except Exception as exc:
                if stop.is_set():
                    return
                log.warning("TaskScaler watch failed (%s); retrying in %.1f s", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()  # type: ignore[no-untyped-call]

    def _list(self) -> str:
        def call() -> Any:
            if self._namespace:
                return self._custom.list_namespaced_custom_object(
                    GROUP, VERSION, self._namespace, PLURAL, _request_timeout=REQUEST_TIMEOUT_S
                )
            return self._custom.list_cluster_custom_object(
                GROUP, VERSION, PLURAL, _request_timeout=REQUEST_TIMEOUT_S
            )

        result = api_call(
            call, operation="list_scalers", metrics=self._metrics, retry=RetrySettings()
        )
        present = set()
        for obj in result.get("items", []):
            present.add(_key(obj))
            self._on_object(obj)
        for gone in self._seen - present:
            self._on_delete(gone)
        self._seen = present
        if self._on_synced is not None:
            self._on_synced()
        return str(result.get("metadata", {}).get("resourceVersion", ""))

    def _watch_from(self, version: str, stop: threading.Event) -> None:
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        kwargs: dict[str, Any] = {
            "resource_version": version,
            "timeout_seconds": max(1, int(self._resync_s)),
            "allow_watch_bookmarks": True,
        }
        if self._namespace:
            func: Callable[..., Any] = self._custom.list_namespaced_custom_object
            args: tuple[Any, ...] = (GROUP, VERSION, self._namespace, PLURAL)
        else:
            func, args = self._custom.list_cluster_custom_object, (GROUP, VERSION, PLURAL)
        try:
            for event in self._watch.stream(func, *args, **kwargs):  # type: ignore[no-untyped-call]
                if stop.is_set():
                    return
                self._dispatch(event["type"], event["object"])
        except ApiException as exc:
            if exc.status != 410:  # 410 Gone: too old, re-list
                self._metrics.count_api_error("watch_scalers")
                raise
        finally:
            self._watch.stop()  # type: ignore[no-untyped-call]

    def _dispatch(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind in ("ADDED", "MODIFIED"):
            self._seen.add(_key(obj))
            self._on_object(obj)
        elif kind == "DELETED":
            self._seen.discard(_key(obj))
            self._on_delete(_key(obj))


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


# --- the controller ------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerSettings:
    watch_namespace: str | None = None
    resync_s: float = 60.0
    api_retry: RetrySettings = field(default_factory=RetrySettings)
    reconciler: ReconcilerSettings = field(default_factory=ReconcilerSettings)


class KubeController:
    """TaskScalers from the API -> a Reconciler with Deployment actuators."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        metrics: ControllerMetrics,
        identity: str,
        settings: ControllerSettings | None = None,
        heartbeat: Callable[[], None] | None = None,
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings or ControllerSettings()
        self.metrics = metrics
        self._apps = client.AppsV1Api(api)
        self._core = client.CoreV1Api(api)
        custom = client.CustomObjectsApi(api)
        self.reporter = KubeReporter(
            custom=custom,
            core=self._core,
            metrics=metrics,
            identity=identity,
            retry=self.settings.api_retry,
        )
        self.reconciler = Reconciler(
            reporter=self.reporter,
            metrics=metrics,
            settings=self.settings.reconciler,
            heartbeat=heartbeat,
        )
        self.watcher = TaskScalerWatcher(
            custom,
            namespace=self.settings.watch_namespace,
            on_object=self.handle,
            on_delete=self.handle_delete,
            metrics=metrics,
            resync_s=self.settings.resync_s,
            on_synced=on_synced,
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> KubeController:
        for name, target in (
            ("taskscaler-watcher", lambda: self.watcher.run(self._stop)),
            ("reconciler", self.reconciler.run),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.watcher.stop()
        self.reconciler.stop()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.name == "reconciler":  # the watcher may sit in a read; it is a daemon
                thread.join(max(0.0, deadline - time.monotonic()))
        self.reconciler.close()

    def handle(self, obj: Mapping[str, Any]) -> None:
        """A TaskScaler was listed, added or changed: (re)register it."""
        if self._stop.is_set():  # a watch still draining after stop(): ignore
            return
        key = _key(obj)
        try:
            scaler = config_from_object(obj)
        except InvalidSpec as exc:
            self.reconciler.remove(key)
            self.reporter.report_invalid(obj, EventReason.INVALID_SPEC, str(exc))
            return
        try:
            url = self.redis_url(scaler)
        except (ApiException, KeyError, ValueError) as exc:
            self.reconciler.remove(key)
            self.reporter.report_invalid(obj, EventReason.SECRET_UNAVAILABLE, _secret_problem(exc))
            return
        self.reporter.seed(obj)
        actuator = DeploymentActuator(
            self._apps,
            self._core,
            scaler.namespace,
            scaler.target,
            self.metrics,
            self.settings.api_retry,
        )
        self.reconciler.upsert(scaler, actuator=actuator, redis_url=url)

    def handle_delete(self, key: str) -> None:
        self.reconciler.remove(key)
        self.reporter.forget(key)

    def redis_url(self, scaler: ScalerConfig) -> str:
        """The scaler's Redis URL, reading its Secret when it names one."""
        ref = scaler.redis
        if ref.url is not None:
            return ref.url
        secret = api_call(
            lambda: self._core.read_namespaced_secret(
                str(ref.secret_name), scaler.namespace, _request_timeout=REQUEST_TIMEOUT_S
            ),
            operation="get_secret",
            metrics=self.metrics,
            retry=self.settings.api_retry,
        )
        data = secret.data or {}
        if ref.secret_key not in data:
            raise KeyError(f"secret {ref.secret_name!r} has no key {ref.secret_key!r}")
        url = base64.b64decode(data[str(ref.secret_key)]).decode("utf-8").strip()
        if "://" not in url:
            raise ValueError(f"secret {ref.secret_name!r} key {ref.secret_key!r} is not a URL")
        return url


def _secret_problem(exc: BaseException) -> str:
    if _status(exc) == 404:
        return "the Redis URL Secret does not exist"
    if isinstance(exc, ApiException):
        return f"reading the Redis URL Secret failed: {exc.status} {exc.reason}"
    return str(exc).strip("'\"")
