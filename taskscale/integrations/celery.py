"""Celery workers keep ACTIVE_TASKS / IDLE_SINCE through Celery's signals.

One call, in the module that makes the app (so every worker process runs it)::

    from taskscale.integrations.celery import install
    install(app, redis_url="redis://redis:6379/0", namespace="taskscale")

Then each task the worker runs counts as one running task of its type (the
Celery task name, or what ``task_type(task)`` returns; None: not counted)
from ``task_prerun`` to ``task_postrun``.  Celery sends ``task_postrun`` in a
``finally`` after every run -- success, exception, retry, reject, ignore --
so a run that ends in Python always counts down.  A run that does not end in
Python (the worker or a prefork child is killed: SIGKILL, a hard time limit,
``revoke(terminate=True)``) is counted down by taskscale.tracking's lease:
within ``lease_s`` any live tracker in the namespace reaps it, and every
worker joins at ``worker_ready`` so an idle one reaps too.

Celery is imported here only when :func:`install` is called.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from taskscale.integrations.process import ProcessTracker, TrackingSettings
from taskscale.tracking import DEFAULT_LEASE_S

log = logging.getLogger(__name__)

#: Celery states after which a run counts as ``failed`` in the type's stats.
FAILED_STATES = frozenset({"FAILURE", "RETRY"})
#: Where install() marks an app, so a second install cannot count every run twice.
_ATTR = "_taskscale_tracking"


class CeleryTracking:
    """What :func:`install` connected; :meth:`uninstall` disconnects it."""

    def __init__(
        self,
        app: Any,
        settings: TrackingSettings,
        task_type: Callable[[Any], str | None] | None,
    ) -> None:
        self.app = app
        self.process = ProcessTracker(settings)
        self._task_type = task_type
        self._lock = threading.Lock()
        self._runs: dict[str, list[str]] = {}  # Celery task id -> tracker ids
        self._connected: list[tuple[Any, Callable[..., None]]] = []

    # --- signal receivers (never raise: Celery would only log it) ---------------------
    def on_prerun(self, task_id: str | None = None, task: Any = None, **_: Any) -> None:
        if task is None or task_id is None or not self._ours(task):
            return
        if getattr(task.request, "is_eager", False):
            return  # task.apply() / always-eager: not a worker's run
        name = self._task_type(task) if self._task_type else task.name
        ttype = self.process.type_name(name) if name else None
        if ttype is None:
            return
        run = self.process.get().start(ttype)
        with self._lock:
            self._runs.setdefault(task_id, []).append(run)

    def on_postrun(
        self, task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
    ) -> None:
        if task_id is None or task is None or not self._ours(task):
            return
        with self._lock:
            runs = self._runs.get(task_id)
            if not runs:
                return
            run = runs.pop()
            if not runs:
                del self._runs[task_id]
        self.process.get().stop(run, failed=state in FAILED_STATES)

    def on_worker_ready(self, sender: Any = None, **_: Any) -> None:
        if sender is None or getattr(sender, "app", self.app) is self.app:
            self.process.open()

    def on_worker_shutdown(self, **_: Any) -> None:
        with self._lock:
            self._runs.clear()
        self.process.close()

    # --- wiring ---------------------------------------------------------------------------
    def connect(self) -> None:
        from celery import signals

        receivers: dict[str, Callable[..., None]] = {
            "task_prerun": self.on_prerun,
            "task_postrun": self.on_postrun,
            "worker_ready": self.on_worker_ready,
            "worker_shutdown": self.on_worker_shutdown,
            # a prefork child leaving (max-tasks-per-child, pool shrink, shutdown)
            "worker_process_shutdown": self.on_worker_shutdown,
        }
        for name, receiver in receivers.items():
            signal = getattr(signals, name)
            signal.connect(receiver, weak=False)
            self._connected.append((signal, receiver))

    def uninstall(self) -> None:
        """Disconnect from Celery's signals and leave (counts this process's runs down)."""
        for signal, receiver in self._connected:
            signal.disconnect(receiver)
        self._connected.clear()
        if getattr(self.app, _ATTR, None) is self:
            delattr(self.app, _ATTR)
        self.on_worker_shutdown()

    def _ours(self, task: Any) -> bool:
        return getattr(task, "app", None) is self.app or getattr(task, "_app", None) is self.app


def install(
    app: Any,
    *,
    redis_url: str | None = None,
    namespace: str | None = None,
    task_type: Callable[[Any], str | None] | None = None,
    lease_s: float = DEFAULT_LEASE_S,
) -> CeleryTracking:
    """Count the tasks ``app``'s workers run in taskscale's ACTIVE_TASKS / IDLE_SINCE.

    ``redis_url``: taskscale's Redis (None: ``TASKSCALE_REDIS_URL``); it may be
    the broker's server or another.  ``namespace``: the TaskScaler's namespace
    (None: ``TASKSCALE_NAMESPACE``, else "taskscale").  ``task_type(task)``:
    the type a run counts as (default ``task.name``; None skips the task; a
    name outside taskscale's alphabet is skipped with a warning).
    ``lease_s``: how long a killed worker's runs stay counted at most.
    Connects no Redis until a worker starts.  Once per app: a second call
    raises RuntimeError (it would count every run twice).
    """
    if getattr(app, _ATTR, None) is not None:
        raise RuntimeError("taskscale tracking is already installed on this app (uninstall() it)")
    tracking = CeleryTracking(
        app, TrackingSettings(redis_url=redis_url, namespace=namespace, lease_s=lease_s), task_type
    )
    tracking.connect()
    setattr(app, _ATTR, tracking)
    return tracking
