"""RQ workers keep ACTIVE_TASKS / IDLE_SINCE: a Worker class that counts each job.

One flag on the usual command::

    rq worker -w taskscale.integrations.rq.TrackingWorker --url redis://redis:6379/0 default

Each job counts as one running task of its type from the moment the worker
hands it to its work horse until the horse is done -- returned, raised,
timed out or killed: the count is kept in the worker's own process, around
``execute_job``, so a horse that dies is counted down like one that
returns.  The worker process itself dying (SIGKILL, a lost node) is left to
taskscale.tracking's lease: a live tracker in the namespace reaps it within
``lease_s``; every tracking worker joins as it starts, so an idle one reaps.

Settings (class attributes of :func:`worker_class`, else the environment):

- type: ``"function"`` (the job's ``func_name``, the default), ``"queue"``
  (the queue it came from) or a callable ``(job, queue) -> str | None``;
  env ``TASKSCALE_RQ_TASK_TYPE``;
- Redis: ``TASKSCALE_REDIS_URL``, else the worker's own connection;
- namespace: ``TASKSCALE_NAMESPACE``, else "taskscale";
- lease: ``TASKSCALE_TRACK_LEASE`` seconds, else 30.

``TrackingWorker`` forks a horse per job (rq's ``Worker``);
``TrackingSimpleWorker`` runs jobs in the worker process (``SimpleWorker``).
RQ is imported only when one of them, or :func:`worker_class`, is asked for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import redis

from taskscale.connection import redis_url_from_env
from taskscale.integrations.process import ProcessTracker, TrackingSettings
from taskscale.redis_urls import RedisClient, node_client
from taskscale.tracking import DEFAULT_LEASE_S

log = logging.getLogger(__name__)

TASK_TYPE_ENV = "TASKSCALE_RQ_TASK_TYPE"
LEASE_ENV = "TASKSCALE_TRACK_LEASE"
#: How a job's type is chosen: a rule's name or a callable ``(job, queue) -> type``.
TaskTypeRule = str | Callable[[Any, Any], str | None]
_RULES: dict[str, Callable[[Any, Any], str | None]] = {
    "function": lambda job, queue: str(job.func_name),
    "queue": lambda job, queue: str(queue.name),
}
_built: dict[str, type[Any]] = {}


def worker_class(
    *,
    base: type[Any] | None = None,
    task_type: TaskTypeRule | None = None,
    redis_url: str | None = None,
    namespace: str | None = None,
    lease_s: float | None = None,
) -> type[Any]:
    """A subclass of ``base`` (default ``rq.Worker``) that counts its jobs.

    Arguments left None come from the environment (see the module's doc) when
    the worker starts.  For a CLI run, name a module attribute holding the
    result: ``MyWorker = worker_class(task_type="queue")``, ``rq worker -w
    app.workers.MyWorker``.
    """
    if isinstance(task_type, str) and task_type not in _RULES:
        raise ValueError(f"task_type must be one of {sorted(_RULES)} or a callable")
    if base is None:
        from rq import Worker

        base = Worker
    attrs = {
        "taskscale_task_type": task_type,
        "taskscale_redis_url": redis_url,
        "taskscale_namespace": namespace,
        "taskscale_lease_s": lease_s,
    }
    return type(f"Tracking{base.__name__}", (_TrackingMixin, base), attrs)


def __getattr__(name: str) -> type[Any]:
    """``TrackingWorker`` and ``TrackingSimpleWorker``, built on first use (PEP 562)."""
    if name not in ("TrackingWorker", "TrackingSimpleWorker"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        import rq

        base = rq.Worker if name == "TrackingWorker" else rq.SimpleWorker
        cls = worker_class(base=base)
        cls.__module__ = __name__
        cls.__qualname__ = cls.__name__ = name
        _built[name] = cls
    return _built[name]


class _TrackingMixin:
    """Counts around ``execute_job``; joins in ``bootstrap``, leaves in ``teardown``."""

    taskscale_task_type: TaskTypeRule | None = None
    taskscale_redis_url: str | None = None
    taskscale_namespace: str | None = None
    taskscale_lease_s: float | None = None
    _taskscale: ProcessTracker | None = None
    _taskscale_rule: Callable[[Any, Any], str | None]
    connection: redis.Redis
    is_horse: bool

    def execute_job(self, job: Any, queue: Any) -> Any:
        process = self._taskscale_process()
        ttype = self._taskscale_type(process, job, queue)
        tracker, run = None, None
        if ttype:
            try:  # Redis errors are logged by start(); this is for a client that cannot be made
                tracker = process.get()
                run = tracker.start(ttype)
            except Exception:
                log.exception("taskscale tracking: job %s not counted", job.id)
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        finally:
            if tracker is not None and run is not None:
                tracker.stop(run, failed=_failed(job))

    def bootstrap(self, *args: Any, **kwargs: Any) -> Any:
        result = super().bootstrap(*args, **kwargs)  # type: ignore[misc]
        process = self._taskscale_process()  # a bad setting stops the worker here
        try:
            process.open()
        except Exception:  # tracking never stops the worker (the next job tries again)
            log.exception("taskscale tracking: could not join at start-up")
        return result

    def teardown(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().teardown(*args, **kwargs)  # type: ignore[misc]
        finally:
            if not self.is_horse and self._taskscale is not None:
                self._taskscale.close()

    # --- settings ---------------------------------------------------------------------
    def _taskscale_process(self) -> ProcessTracker:
        if self._taskscale is None:
            # read on the class: a function there would bind to the worker
            rule = type(self).taskscale_task_type or os.environ.get(TASK_TYPE_ENV) or "function"
            if not callable(rule) and rule not in _RULES:
                raise ValueError(f"{TASK_TYPE_ENV}={rule!r}: use one of {sorted(_RULES)}")
            self._taskscale_rule = rule if callable(rule) else _RULES[rule]
            lease = self.taskscale_lease_s or float(os.environ.get(LEASE_ENV) or DEFAULT_LEASE_S)
            url = redis_url_from_env(self.taskscale_redis_url, default=None)
            settings = TrackingSettings(url, self.taskscale_namespace, lease)
            factory = None if url else self._taskscale_own_client
            self._taskscale = ProcessTracker(settings, client_factory=factory)
        return self._taskscale

    def _taskscale_own_client(self) -> RedisClient:
        """A client on the worker's Redis with a pool of its own (the horse forks)."""
        return node_client(self.connection, single_connection=False)

    def _taskscale_type(self, process: ProcessTracker, job: Any, queue: Any) -> str | None:
        try:
            name = self._taskscale_rule(job, queue)
        except Exception:  # tracking never breaks the job it counts
            log.exception("taskscale tracking: no type for job %s; not counted", job.id)
            return None
        return process.type_name(name) if name else None


def _failed(job: Any) -> bool:
    """The run did not finish (failed, stopped, or sent back for a retry)."""
    try:
        status = job.get_status(refresh=True)
    except Exception:  # the job's key expired (a finished job with no result ttl)
        return False
    return status is not None and str(getattr(status, "value", status)) != "finished"
