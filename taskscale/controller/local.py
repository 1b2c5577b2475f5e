"""The local actuator: ``taskscale worker`` processes on this machine.

Why it exists: the controller's policy is the same with or without
Kubernetes, and a single VM (or ``taskscale demo``) should get the same
scale-to-zero and scale-from-zero behaviour without a cluster.  A
:class:`LocalPool` is the local stand-in for a Deployment: its replicas are
worker subprocesses, each with a unique ``POD_NAME`` so the registry, the
observer and ``busy_by_pod`` name them as they would name pods.

Scale-down follows the same rule as the Kubernetes actuator's
pod-deletion-cost: stop the least busy workers first, and stop them
gracefully -- SIGTERM makes a worker stop claiming, finish what it runs, and
exit.  A stopping worker no longer counts as a replica; it is reaped when it
exits (and killed if it overstays its drain timeout).  A worker that dies on
its own is reaped too, so the next reconcile replaces it, as a ReplicaSet
would.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from taskscale.connection import REDIS_URL_ENV
from taskscale.controller.types import Rollout
from taskscale.keys import DEFAULT_NAMESPACE, check_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalPoolSettings:
    """What each worker process runs, and how the pool stops them."""

    types: tuple[str, ...]
    redis_url: str
    namespace: str = DEFAULT_NAMESPACE
    threads: int = 4
    #: Modules that register the task functions (``--import``).
    imports: tuple[str, ...] = ()
    #: Worker names are ``<name_prefix>-<n>``; the default includes our pid so
    #: two pools on one Redis never share a name.
    name_prefix: str = field(default_factory=lambda: f"local-{os.getpid()}")
    #: The interpreter that runs ``-m taskscale.cli worker``.
    python: str = sys.executable
    #: Extra arguments for ``taskscale worker`` (e.g. a grace period).
    extra_args: tuple[str, ...] = ()
    #: Worker output goes to ``<log_dir>/<name>.log``; None = this process's stdout/stderr.
    log_dir: Path | None = None
    #: A SIGTERMed worker still running after this long is killed.
    drain_timeout_s: float = 60.0
    #: Run this instead of ``taskscale worker`` (e.g. a Celery or RQ worker
    #: whose queues a TaskScaler reads through its ``source``); it gets the
    #: same environment (POD_NAME, the Redis URL) and the same SIGTERM drain.
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.types:
            raise ValueError("a local pool needs at least one task type")
        for t in self.types:
            check_name("task type", t)
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        if self.command is not None and not self.command:
            raise ValueError("command must not be empty")


@dataclass
class _Worker:
    name: str
    process: subprocess.Popen[bytes]
    started: float
    log_file: IO[bytes] | None = None
    stop_requested: float | None = None

    def close_log(self) -> None:
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None


class LocalPool:
    """Implements :class:`taskscale.controller.types.Actuator` with subprocesses.

    Thread-safe: the reconciler scales it from its loop while the demo's main
    thread may call :meth:`stop_all` on Ctrl-C.
    """

    def __init__(self, settings: LocalPoolSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._running: dict[str, _Worker] = {}
        self._draining: dict[str, _Worker] = {}
        self._numbers = itertools.count(1)
        #: Workers that exited without being asked to (crashes), for reporting.
        self.unexpected_exits = 0

    # --- Actuator ------------------------------------------------------------
    def current_replicas(self) -> int:
        with self._lock:
            self._reap()
            return len(self._running)

    def rollout(self) -> Rollout | None:
        return None  # local processes are replaced one by one, never rolled out

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        if replicas < 0:
            raise ValueError("replicas must not be negative")
        with self._lock:
            self._reap()
            missing = replicas - len(self._running)
            for _ in range(missing):
                self._start_one()
            if missing < 0:
                for name in self._least_busy(-missing, busy_by_pod):
                    self._request_stop(self._running.pop(name))

    # --- introspection ---------------------------------------------------------
    def worker_names(self) -> list[str]:
        """Names (``POD_NAME``) of the workers counted as replicas, oldest first."""
        with self._lock:
            self._reap()
            return list(self._running)

    def draining_names(self) -> list[str]:
        """Workers told to stop that have not exited yet."""
        with self._lock:
            self._reap()
            return list(self._draining)

    def pids(self) -> list[int]:
        """Process ids of every worker still alive or not yet reaped."""
        with self._lock:
            return [w.process.pid for w in (*self._running.values(), *self._draining.values())]

    # --- shutdown ----------------------------------------------------------------
    def stop_all(self, timeout: float = 30.0) -> None:
        """SIGTERM every worker, wait up to ``timeout`` for them to drain, kill the rest."""
        with self._lock:
            for name in list(self._running):
                self._request_stop(self._running.pop(name))
            workers = list(self._draining.values())
        try:
            _wait_or_kill(workers, timeout)
        except KeyboardInterrupt:  # a second Ctrl-C: no more waiting, but no strays either
            for w in workers:
                _kill(w)
            raise
        finally:
            with self._lock:
                self._reap()

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    # --- internals (called with the lock held) -----------------------------------
    def command(self) -> list[str]:
        """The worker command line (the same for every worker of the pool)."""
        s = self.settings
        if s.command is not None:
            return list(s.command)
        cmd = [s.python, "-m", "taskscale.cli", "worker", "--types", ",".join(s.types)]
        cmd += ["--threads", str(s.threads), "--namespace", s.namespace]
        for module in s.imports:
            cmd += ["--import", module]
        return [*cmd, *s.extra_args]

    def _start_one(self) -> None:
        name = f"{self.settings.name_prefix}-{next(self._numbers)}"
        log_file = self._open_log(name)
        # The URL goes in the environment, not argv: it may hold a password, and argv is public.
        env = {**os.environ, "POD_NAME": name, REDIS_URL_ENV: self.settings.redis_url}
        process = subprocess.Popen(
            self.command(),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT if log_file is not None else None,
            # Own session: a terminal's Ctrl-C reaches us only, and we drain workers ourselves.
            start_new_session=True,
        )
        self._running[name] = _Worker(name, process, time.monotonic(), log_file)
        log.info("local pool: started %s (pid %d)", name, process.pid)

    def _open_log(self, name: str) -> IO[bytes] | None:
        if self.settings.log_dir is None:
            return None
        self.settings.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.settings.log_dir / f"{name}.log", "ab")

    def _least_busy(self, count: int, busy_by_pod: Mapping[str, int]) -> list[str]:
        # Idle first; among equals the youngest, which has the least warm state.
        order = sorted(
            self._running.values(), key=lambda w: (busy_by_pod.get(w.name, 0), -w.started)
        )
        return [w.name for w in order[:count]]

    def _request_stop(self, worker: _Worker) -> None:
        worker.stop_requested = time.monotonic()
        self._draining[worker.name] = worker
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
            log.info("local pool: stopping %s (SIGTERM, draining)", worker.name)

    def _reap(self) -> None:
        for name, w in list(self._running.items()):
            if w.process.poll() is not None:
                del self._running[name]
                w.close_log()
                self.unexpected_exits += 1
                log.warning("local pool: %s exited with %s", name, w.process.returncode)
        now = time.monotonic()
        for name, w in list(self._draining.items()):
            if w.process.poll() is None:
                overdue = w.stop_requested is not None and (
                    now - w.stop_requested > self.settings.drain_timeout_s
                )
                if not overdue:
                    continue
                log.warning("local pool: %s still draining; killing it", name)
                _kill(w)
            del self._draining[name]
            w.close_log()


def _wait_or_kill(workers: list[_Worker], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for w in workers:
        try:
            w.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("local pool: %s did not stop in %.0f s; killing it", w.name, timeout)
            _kill(w)


def _kill(worker: _Worker) -> None:
    if worker.process.poll() is None:
        worker.process.kill()
    worker.process.wait()
