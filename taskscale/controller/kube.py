"""The Kubernetes side of the controller: TaskScalers in, scale + status + Events out.

Four parts, each small:

* :class:`TaskScalerWatcher` lists and watches TaskScaler objects (all
  namespaces or one) and hands every object it sees to a callback; the watch
  ends every ``resync_s`` and is re-listed, so Secrets are re-read and a
  missed event is repaired -- the reconciler is level-triggered anyway.
* the actuators (in scale_target.py): :class:`DeploymentActuator` touches
  only a Deployment's ``scale`` subresource (never its spec), and before a
  scale-down sets ``controller.kubernetes.io/pod-deletion-cost`` on the
  Deployment's pods from the worker registry's busy counts, so the ReplicaSet
  removes idle pods first; any other kind with a ``scale`` subresource works
  the same way through ``scaleTargetRef.apiVersion``/``kind``.
* :class:`~taskscale.controller.kube_status.KubeReporter` (in kube_status.py)
  turns each reconcile outcome into the TaskScaler's status (patched only
  when it changed) and Events (on every scale, and when a problem starts or
  ends).
* :class:`KubeController` wires the three to a :class:`Reconciler`.

Every API call goes through :func:`~taskscale.controller.kube_client.api_call`:
tenacity retries for transient failures (5xx, 429, connection errors), every
failed attempt counted in ``taskscale_kube_api_errors_total``.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from taskscale.backoff import exponential
from taskscale.controller.config import InvalidSpec, ScalerConfig, config_from_object
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.job_target import JobActuator
from taskscale.controller.kube_client import (
    DELETION_COST,
    FIELD_MANAGER,
    GROUP,
    KIND,
    PLURAL,
    REQUEST_TIMEOUT_S,
    VERSION,
    KubeConfigError,
    api_call,
    api_status,
    install_crd,
    is_transient,
    load_api_client,
    rfc3339,
)
from taskscale.controller.kube_status import (
    ConditionType,
    EventReason,
    KubeReporter,
    build_status,
    status_differs,
)
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import (
    Reconciler,
    ReconcilerSettings,
    RetrySettings,
)
from taskscale.controller.redis_clients import RedisClients
from taskscale.controller.scale_target import DeploymentActuator, make_actuator

# defined here before the status document moved to status_doc.py: the old
# import path keeps working
from taskscale.controller.status_doc import (
    conditions_for,
    merge_conditions,
    observations_status,
)
from taskscale.errors import describe_error, one_line
from taskscale.redis_urls import check_url

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
    "conditions_for",
    "install_crd",
    "is_transient",
    "load_api_client",
    "merge_conditions",
    "observations_status",
    "rfc3339",
    "status_differs",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        failures = 0  # in a row: a successful list starts the backoff over
        while not stop.is_set():
            try:
                version = self._list()
                failures = 0
                self._watch_from(version, stop)
            except Exception as exc:
                if stop.is_set():
                    return
                delay = exponential(failures, base_s=0.5, cap_s=30.0)
                failures += 1
                log.warning("TaskScaler watch failed (%s); retrying in %.1f s", exc, delay)
                stop.wait(delay)

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
        self._batch = client.BatchV1Api(api)
        custom = client.CustomObjectsApi(api)
        self.reporter = KubeReporter(
            custom=custom,
            core=self._core,
            metrics=metrics,
            identity=identity,
            retry=self.settings.api_retry,
        )
        # one Redis client per URL, for the passes and the decision log alike
        clients = RedisClients(timeout_s=self.settings.reconciler.redis_timeout_s)
        # every pass reported into Redis too, for the dashboard
        self.decisions = DecisionLog(self.reporter, clients=clients)
        self.reconciler = Reconciler(
            reporter=self.decisions,
            metrics=metrics,
            settings=self.settings.reconciler,
            heartbeat=heartbeat,
            clients=clients,
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
        self.decisions.close()  # its hold on each URL's shared client

    def handle(self, obj: Mapping[str, Any]) -> None:
        """A TaskScaler was listed, added or changed: (re)register it.

        Never raises: whatever goes wrong with one TaskScaler is reported on
        that object (Ready=False, a Warning Event) and the watch goes on to
        the next, so one bad object cannot stall the others or readiness."""
        if self._stop.is_set():  # a watch still draining after stop(): ignore
            return
        key = _key(obj)
        url: str | None = None
        try:
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
                problem = _secret_problem(exc)
                self.reporter.report_invalid(obj, EventReason.SECRET_UNAVAILABLE, problem)
                return
            self._register(obj, scaler, url)
        except Exception as exc:  # a bug for one object must not stop the others
            log.warning("TaskScaler %s not registered", key, exc_info=True)
            self.reconciler.remove(key)
            message = f"the controller could not register it: {one_line(exc, typed=True, url=url)}"
            try:
                self.reporter.report_invalid(obj, EventReason.REGISTRATION_FAILED, message)
            except Exception as report_exc:  # the API may be the problem: log, go on
                log.warning("TaskScaler %s: problem not reported: %s", key, report_exc)

    def _register(self, obj: Mapping[str, Any], scaler: ScalerConfig, url: str) -> None:
        """Hand a valid TaskScaler to the reconciler and the decision log."""
        self.reporter.seed(obj)
        actuator: DeploymentActuator | JobActuator
        if scaler.jobs is not None:  # Job mode: one Job per task (job_target.py)
            actuator = JobActuator(
                self._batch,
                self._core,
                scaler.namespace,
                scaler.name,
                scaler.jobs,
                self.metrics,
                retry=self.settings.api_retry,
                scaler=scaler.key,
                owner_uid=scaler.uid,
            )
        else:
            actuator = make_actuator(
                scaler,
                apps=self._apps,
                core=self._core,
                metrics=self.metrics,
                retry=self.settings.api_retry,
                scaler=scaler.key,
            )
        try:
            self.decisions.bind(scaler, url)
            self.reconciler.upsert(scaler, actuator=actuator, redis_url=url)
        except redis.RedisError as exc:  # a redis+cluster:// URL reads the slot map at once
            self.reconciler.remove(scaler.key)  # tried again at the next re-list
            self.reporter.report_invalid(obj, EventReason.REDIS_UNREACHABLE, describe_error(exc))

    def handle_delete(self, key: str) -> None:
        self.reconciler.remove(key)
        self.reporter.forget(key)
        self.decisions.forget(key)

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
            scaler=scaler.key,
        )
        data = secret.data or {}
        if ref.secret_key not in data:
            raise KeyError(f"secret {ref.secret_name!r} has no key {ref.secret_key!r}")
        where = f"secret {ref.secret_name!r} key {ref.secret_key!r}"
        try:
            url = base64.b64decode(data[str(ref.secret_key)]).decode("utf-8").strip()
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise ValueError(f"{where} is not a UTF-8 text") from None
        try:
            check_url(url)  # the same check as spec.redis.url; the password masked
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        return url


def _secret_problem(exc: BaseException) -> str:
    if api_status(exc) == 404:
        return "the Redis URL Secret does not exist"
    if isinstance(exc, ApiException):
        return f"reading the Redis URL Secret failed: {exc.status} {exc.reason}"
    return str(exc).strip("'\"")
