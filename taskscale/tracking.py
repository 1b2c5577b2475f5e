"""Count tasks that run outside taskscale's worker: ``track`` and :class:`Tracker`.

Why it exists: the controller sizes a Deployment from ``ACTIVE_TASKS`` and
``IDLE_SINCE`` (the two hashes of the origin design).  Our own worker keeps
them in its claim/complete scripts; a Celery or RQ worker, or any code that
takes work from somewhere else, keeps them through this module, with the same
rules:

- every change is one Lua script (``track_start``, ``track_stop``,
  ``track_sync``), so a crash between two commands cannot skew a count;
- ACTIVE_TASKS never goes below 0 (an extra stop counts ``active_underflow``);
- IDLE_SINCE is the Redis clock (``TIME`` inside the script), not this host's;
- a task is recorded in this process's in-flight hash under a *lease*.  A
  daemon thread renews the lease and re-syncs the hash with what the process
  runs, and reaps peers whose lease expired -- so a killed process's tasks
  are counted down by any live one, and a lost reply heals at the next beat;
- the process records the pod it runs in (``POD_NAME``, else the host name,
  as taskscale's worker does), so the controller knows which pods run tasks
  and a scale-down stops idle workers first (pod-deletion-cost, a local
  pool's choice, a StatefulSet's ordinal hold).

Tracking never breaks the task it counts: a Redis error in ``start``/``stop``
is logged and left to the next heartbeat to repair.

``track("resize")`` is a context manager and a decorator on the process-wide
tracker (Redis from ``TASKSCALE_REDIS_URL``, keys from ``TASKSCALE_NAMESPACE``);
docs/schema.md describes the protocol for other languages.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

import redis
from redis.cluster import RedisCluster

from taskscale import checks
from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_LEASE_S = 30.0
#: Most expired peers one heartbeat reaps (more wait for the next beat).
REAP_BATCH = 100


@dataclass(frozen=True)
class SyncResult:
    """What one heartbeat changed."""

    counted_up: int  #: tasks this process runs that the hash had lost
    counted_down: int  #: tasks of this process or of dead peers counted down
    reaped: int  #: dead peers whose records were dropped


def default_pod() -> str:
    """``POD_NAME`` (the Downward API's pod name), else this host's name."""
    return os.environ.get("POD_NAME") or socket.gethostname() or "host"


def default_process_id() -> str:
    """``<host>-<pid>-<random>``: unique per process, legal in key names."""
    host = re.sub(r"[^A-Za-z0-9_.\-]", "-", socket.gethostname())[:80] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Tracker:
    """Keeps ACTIVE_TASKS / IDLE_SINCE for the tasks this process runs.

    Thread-safe.  Not fork-safe: a forked child must make its own (the
    process-wide tracker behind :func:`track` does so by itself).
    """

    def __init__(
        self,
        client: RedisClient,
        keys: Keys | None = None,
        *,
        process_id: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        heartbeat_s: float | None = None,
        pod: str | None = None,
    ) -> None:
        checks.seconds("lease_s", lease_s, positive=True)
        if heartbeat_s is not None:
            checks.seconds("heartbeat_s", heartbeat_s, positive=True)
        if not isinstance(client, redis.Redis | RedisCluster):
            raise TypeError(f"client must be a Redis client (redis.Redis), not {client!r}")
        self.client = client
        self.keys = Keys.or_env(keys)
        self.process_id = check_name("process id", process_id or default_process_id())
        #: The pod this process runs in (recorded in ``track:pods`` with its lease).
        self.pod = pod or default_pod()
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else lease_s / 3
        self._start = bound_script(client, "track_start")
        self._stop = bound_script(client, "track_stop")
        self._sync = bound_script(client, "track_sync")
        # Held while the local set changes *and* its script runs, so a heartbeat
        # never syncs a set older than a start/stop that already reached Redis.
        self._lock = threading.Lock()
        self._running: dict[str, tuple[str, float]] = {}  # id -> (type, monotonic start)
        self._ids = itertools.count(1)
        self._closed = threading.Event()
        self._beater: threading.Thread | None = None

    # --- the protocol ------------------------------------------------------------
    def start(self, task_type: str, task_id: str | None = None) -> str:
        """Count one running task of ``task_type``; returns its id (for :meth:`stop`)."""
        check_name("task type", task_type)
        task_id = task_id or f"t{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        k = self.keys
        with self._lock:
            if task_id in self._running:
                return task_id
            self._running[task_id] = (task_type, time.monotonic())
            self._call(
                self._start,
                [k.active, k.tracked_processes, self._inflight, k.stats(task_type), k.tracked_pods],
                [task_id, task_type, round(self.lease_s * 1000), self.process_id, self.pod],
            )
        self._ensure_heartbeat()
        return task_id

    def stop(self, task_id: str, *, failed: bool = False) -> None:
        """The task ended (``failed``: it raised); unknown ids are ignored."""
        k = self.keys
        with self._lock:
            entry = self._running.pop(task_id, None)
            if entry is None:
                return
            task_type, started = entry
            service_ms = round((time.monotonic() - started) * 1000)
            self._call(
                self._stop,
                [k.active, k.idle_since, self._inflight, k.stats(task_type)],
                [task_id, task_type, "failed" if failed else "completed", service_ms],
            )

    def heartbeat(self) -> SyncResult:
        """Renew the lease, make the in-flight hash match :meth:`running`, reap dead peers."""
        with self._lock:
            lease_ms = 0 if self._closed.is_set() else round(self.lease_s * 1000)
            pairs = [v for task_id, (t, _) in self._running.items() for v in (task_id, t)]
            k = self.keys
            reply = self._sync(
                keys=[k.active, k.idle_since, k.tracked_processes, k.tracked_pods],
                args=[k.prefix, self.process_id, lease_ms, REAP_BATCH, self.pod, *pairs],
                client=self.client,
            )
        return SyncResult(*(int(v) for v in reply))

    def open(self) -> None:
        """Join before any task starts: one heartbeat now (so expired peers are
        reaped at once) and the heartbeat thread, which keeps reaping them while
        this process is idle.  A worker that replaces a killed one calls this at
        start-up; without it the thread starts with the first task."""
        try:
            self.heartbeat()
        except redis.RedisError as exc:
            log.warning("tracking: first heartbeat failed (%s); the thread retries", exc)
        self._ensure_heartbeat()

    def running(self) -> dict[str, str]:
        """Task id -> type of the tasks this process counts now."""
        with self._lock:
            return {task_id: t for task_id, (t, _) in self._running.items()}

    @contextlib.contextmanager
    def task(self, task_type: str, task_id: str | None = None) -> Any:
        """``with tracker.task("resize"):`` counts the block as one running task."""
        tid = self.start(task_type, task_id)
        failed = True
        try:
            yield tid
            failed = False
        finally:
            self.stop(tid, failed=failed)

    def close(self) -> None:
        """Leave: stop the heartbeat, count down anything still counted, drop the lease."""
        self._closed.set()
        beater, self._beater = self._beater, None
        if beater is not None:
            beater.join(5.0)
        with self._lock:
            self._running.clear()
        try:
            self.heartbeat()
        except redis.RedisError as exc:
            log.warning("tracking: leaving failed (%s); the lease will expire by itself", exc)

    # --- internals -----------------------------------------------------------------
    @property
    def _inflight(self) -> str:
        return self.keys.tracked_inflight(self.process_id)

    def _call(self, script: Any, keys: list[str], args: list[str | int]) -> None:
        try:
            script(keys=keys, args=args, client=self.client)
        except redis.RedisError as exc:
            log.warning("tracking: %s; the next heartbeat repairs the count", exc)

    def _ensure_heartbeat(self) -> None:
        if self._beater is not None or self._closed.is_set():
            return
        with self._lock:
            if self._beater is None:
                self._beater = threading.Thread(
                    target=self._beat, name="taskscale-tracking", daemon=True
                )
                self._beater.start()

    def _beat(self) -> None:
        while not self._closed.wait(self.heartbeat_s):
            try:
                self.heartbeat()
            except redis.RedisError as exc:
                log.warning("tracking: heartbeat failed: %s", exc)


# --- the process-wide tracker ----------------------------------------------------------
_default_lock = threading.Lock()
_default: Tracker | None = None
_default_pid = 0


def default_tracker() -> Tracker:
    """This process's tracker (created on first use, again after a fork)."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            from taskscale.connection import connect

            _default, _default_pid = Tracker(connect()), os.getpid()
        return _default


def set_default_tracker(tracker: Tracker | None) -> None:
    """Use ``tracker`` for :func:`track` in this process (None: build one from the env)."""
    global _default, _default_pid
    with _default_lock:
        _default, _default_pid = tracker, os.getpid()


class track(contextlib.ContextDecorator):  # a class, but it reads as a function
    """Count a block or every call of a function as one running task of ``task_type``::

        with track("resize"):
            ...

        @track("resize")
        def resize(...): ...

    An exception counts the run as ``failed`` and propagates.
    """

    def __init__(self, task_type: str, *, tracker: Tracker | None = None) -> None:
        self.task_type = check_name("task type", task_type)  # at decoration, not first call
        self._tracker = tracker
        self._ids: list[str] = []

    def _recreate_cm(self) -> track:
        return track(self.task_type, tracker=self._tracker)

    def __enter__(self) -> str:
        tracker = self._tracker or default_tracker()
        task_id = tracker.start(self.task_type)
        self._ids.append(task_id)
        return task_id

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tracker = self._tracker or default_tracker()
        tracker.stop(self._ids.pop(), failed=exc_type is not None)


def tracked(task_type: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A typed spelling of ``@track(task_type)`` for mypy-strict code."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            with track(task_type):
                return fn(*args, **kwargs)

        return inner

    return wrap
