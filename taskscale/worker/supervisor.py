"""Several worker processes in one pod: ``taskscale worker --processes P``.

One Python process runs Python code on one CPU at a time, so a pod with
several CPUs runs several worker processes.  With ``--processes P`` (P > 1,
or ``auto``: the container's CPU limit, :mod:`taskscale.worker.cpu_limit`) the
command becomes this supervisor, which runs P children, each a complete
``taskscale worker`` with the same options and its own worker id
(``<id>-0``, ``<id>-1``, ...), so its own lease, in-flight hash and registry
record.  The children share the pod name (``POD_NAME``), so the registry,
``taskscale status``, the dashboard and the controller group them by pod.

* **Signals.**  The children run in their own process groups, so a Ctrl-C
  on a terminal reaches the supervisor only; it forwards every SIGTERM and
  SIGINT to every child (a first one drains, a second stops at once, as for
  a single worker) from a thread (:func:`taskscale.signals.on_stop_signals`),
  then waits for all of them.  It exits 0 when every child exited 0.
* **Crashes.**  A child that exits while no stop was asked for is started
  again, under a new id (``<id>-0-r1``, ...: a fresh lease, a fresh registry
  entry), after an exponential backoff (:class:`RestartPolicy`; a child that
  stayed up a while starts the backoff over).
* **Its tasks come back at once.**  When a child exits with a non-zero code
  (killed, OOM, a crash), the supervisor runs ``requeue.lua`` in its
  ``dead`` mode for that child's id: every task still in the child's
  in-flight hash goes back to the head of its queue, ACTIVE_TASKS is
  decremented, the lease and registry record are dropped, and each task's
  "reaped" count is raised exactly as the scheduler's reaper would.  This is
  the reaper's work done a lease period earlier, and it is safe because the
  supervisor *knows* the child is dead (``waitpid`` returned): nothing of it
  is running, it can claim nothing more, and nothing can record an outcome
  under its id (the new incarnation has another id).  Nothing is lost: a
  task is either recorded (complete/fail removed it from the in-flight hash
  in the same script) or still in the hash, and then it is returned.  Nothing
  is duplicated: the script is atomic and acts only on what is in the hash,
  so a reaper running at the same moment finds it empty, and a task recorded
  before the death is not returned.  (As with any crash, a task whose body
  ran but whose outcome the child never recorded runs again: at least once.)
  If Redis is unreachable then, the lease runs out and the reaper does it.

The supervisor serves no metrics itself: with ``--metrics-port N`` child i
serves ``/metrics``, ``/healthz`` and ``/readyz`` on port N + i
(docs/operating.md).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import redis

from taskscale.backoff import exponential
from taskscale.cli.envdefaults import env_name
from taskscale.connection import REDIS_URL_ENV, check_version, connect
from taskscale.errors import describe_error
from taskscale.keys import MAX_NAME_CHARS, Keys
from taskscale.luascripts import scripts_for
from taskscale.redis_urls import RedisClient
from taskscale.retrying import retrying
from taskscale.shards import ShardMap
from taskscale.signals import on_stop_signals
from taskscale.worker.settings import default_worker_id

log = logging.getLogger("taskscale.supervisor")

#: Options the supervisor sets per child instead of passing its own on.
_PER_CHILD = frozenset({"processes", "worker_id", "metrics_port", "redis_url", "help"})


@dataclass(frozen=True)
class RestartPolicy:
    """When a child that died is started again."""

    #: Wait before the first restart; doubled for each further crash in a row.
    first_s: float = 0.5
    #: The longest wait between restarts.
    max_s: float = 30.0
    #: A child that stayed up this long starts the backoff over.
    stable_s: float = 60.0

    def delay(self, crashes: int) -> float:
        """Seconds before restarting a child after its ``crashes``-th crash in a row."""
        return exponential(crashes - 1, base_s=self.first_s, cap_s=self.max_s)


def child_id(base: str, index: int, generation: int) -> str:
    """``<base>-<index>``, and ``<base>-<index>-r<n>`` for the n-th restart."""
    suffix = f"-{index}" if generation == 0 else f"-{index}-r{generation}"
    return base[: MAX_NAME_CHARS - len(suffix)] + suffix


@dataclass
class _Child:
    index: int
    generation: int = 0
    worker_id: str = ""
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    crashes: int = 0
    restart_at: float | None = 0.0  # None: not to be started again


class Supervisor:
    """Runs ``processes`` children and keeps them running until stopped.

    ``command(index, worker_id)`` is a child's command line; ``return_tasks
    (worker_id)`` returns a dead child's in-flight tasks to their queues.
    """

    def __init__(
        self,
        *,
        processes: int,
        base_id: str,
        command: Callable[[int, str], Sequence[str]],
        return_tasks: Callable[[str], int],
        env: Mapping[str, str] | None = None,
        restart: RestartPolicy | None = None,
    ) -> None:
        if processes < 1:
            raise ValueError("--processes must be at least 1")
        self._base_id = base_id
        self._command = command
        self._return_tasks = return_tasks
        self._env = dict(os.environ if env is None else env)
        self._restart = restart or RestartPolicy()
        self._children = [_Child(i) for i in range(processes)]
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._clean = True

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Forward ``signum`` to every child and start no more (not in a handler)."""
        with self._lock:
            self._stopping = True
            for child in self._children:
                if child.process is not None and child.process.returncode is None:
                    child.process.send_signal(signum)
        self._wake.set()

    def run(self) -> int:
        """Start the children; restart those that die; return when all have
        stopped after a stop request: 0 if every child exited 0, else 1."""
        try:
            while True:
                now = time.monotonic()
                for child, code in self._reap_exited():
                    self._exited(child, code, now)
                with self._lock:
                    for child in self._children:
                        due = child.restart_at is not None and now >= child.restart_at
                        if child.process is None and due and not self._stopping:
                            self._start(child)
                    if self._stopping and all(c.process is None for c in self._children):
                        return 0 if self._clean else 1
                self._wake.wait(0.1)
                self._wake.clear()
        finally:
            self._abandon_children()

    def _reap_exited(self) -> list[tuple[_Child, int]]:
        exited = []
        with self._lock:
            for child in self._children:
                code = child.process.poll() if child.process is not None else None
                if code is not None:
                    child.process = None
                    exited.append((child, code))
        return exited

    def _start(self, child: _Child) -> None:
        child.worker_id = child_id(self._base_id, child.index, child.generation)
        child.generation += 1
        child.started = time.monotonic()
        child.restart_at = None
        try:
            child.process = subprocess.Popen(
                list(self._command(child.index, child.worker_id)),
                env=self._env,
                process_group=0,  # signals come from us, not from the terminal
            )
        except OSError as exc:
            log.error("cannot start worker %s: %s", child.worker_id, exc, extra=_about(child))
            self._schedule_restart(child, time.monotonic())
            return
        log.info(
            "started worker %s (pid %d)", child.worker_id, child.process.pid, extra=_about(child)
        )

    def _exited(self, child: _Child, code: int, now: float) -> None:
        with self._lock:
            stopping = self._stopping
        # killed by the stop signal itself: it came before the child had its
        # handlers, i.e. before it registered or claimed anything
        by_our_signal = stopping and -code in (signal.SIGTERM, signal.SIGINT)
        if code != 0:
            self._clean = self._clean and (not stopping or by_our_signal)
            log.warning(
                "worker %s exited with %s", child.worker_id, _describe(code), extra=_about(child)
            )
            self._give_back(child.worker_id)
        elif not stopping:
            log.warning("worker %s exited unasked", child.worker_id, extra=_about(child))
        if not stopping:
            self._schedule_restart(child, now)

    def _schedule_restart(self, child: _Child, now: float) -> None:
        if now - child.started >= self._restart.stable_s:
            child.crashes = 0
        child.crashes += 1
        delay = self._restart.delay(child.crashes)
        child.restart_at = now + delay
        log.info("restarting worker %d in %.1fs", child.index, delay, extra=_about(child))

    def _give_back(self, worker_id: str) -> None:
        try:
            moved = self._return_tasks(worker_id)
        except redis.RedisError as exc:
            log.error(
                "could not return the tasks of worker %s (%s); the reaper returns "
                "them when its lease expires",
                worker_id,
                describe_error(exc),
                extra={"worker_id": worker_id},
            )
            return
        log.warning(
            "%d task(s) of worker %s back in their queues",
            moved,
            worker_id,
            extra={"worker_id": worker_id},
        )

    def _abandon_children(self) -> None:
        """On an error of our own: ask the children that still run to drain."""
        with self._lock:
            for child in self._children:
                if child.process is not None and child.process.poll() is None:
                    child.process.send_signal(signal.SIGTERM)


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def dead_worker_requeue(client: RedisClient, keys: Keys) -> Callable[[str], int]:
    """``return_tasks`` for :class:`Supervisor`: ``requeue.lua`` in ``dead``
    mode for a worker id (retried for a few seconds on a transient error)."""
    scripts = scripts_for(client)

    def return_tasks(worker_id: str) -> int:
        def once() -> int:
            return int(
                scripts.requeue(
                    keys=[
                        keys.active,
                        keys.workers,
                        keys.inflight(worker_id),
                        keys.worker(worker_id),
                    ],
                    args=[keys.prefix, worker_id, "dead"],
                    client=client,
                )
            )

        return retrying(once, give_up_after_s=5.0)

    return return_tasks


def _about(child: _Child) -> dict[str, str]:
    """``extra=`` of a record about one worker process: its id as a field."""
    return {"worker_id": child.worker_id}


def child_argv(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The options of ``args`` as a command line for ``parser``, without those
    the supervisor sets per child (``--processes``, ``--worker-id``,
    ``--metrics-port``; the Redis URL goes by environment, out of ``ps``)."""
    argv: list[str] = []
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest in _PER_CHILD:
            continue
        value = getattr(args, action.dest, None)
        if isinstance(action, argparse._StoreTrueAction):
            argv += [longs[0]] if value else []
        elif isinstance(action, argparse._StoreFalseAction):
            argv += [longs[0]] if value is False else []
        elif isinstance(action, argparse._AppendAction):
            argv += [f"{longs[0]}={v}" for v in value or []]
        elif isinstance(action, argparse._StoreAction) and value is not None:
            argv.append(f"{longs[0]}={value}")
    return argv


def run_supervisor(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    *,
    early_signals: Sequence[int] = (),
) -> int:
    """``taskscale worker --processes P`` with P > 1 (the CLI's entry);
    ``early_signals`` arrived while the command was starting up."""
    pod = os.environ.get("POD_NAME") or socket.gethostname()
    base_id = args.worker_id or default_worker_id(pod)
    types = [t.strip() for t in args.types.split(",") if t.strip()]
    keys = ShardMap.parse(args.namespace).only_namespace(types)
    port = args.metrics_port
    if port and port + args.processes - 1 > 65535:
        raise ValueError(f"--metrics-port {port} + {args.processes} processes passes 65535")
    client = connect(args.redis_url)
    # a server too old for the scripts stops the pod here (exit 2), rather
    # than each child in turn, restarted with backoff forever
    with contextlib.suppress(redis.RedisError):  # down now: the children wait for it
        check_version(client.info("server"))
    options = child_argv(parser, args)

    def command(index: int, worker_id: str) -> list[str]:
        own = ["--processes=1", f"--worker-id={worker_id}"]
        if port is not None:
            own.append(f"--metrics-port={port + index if port else 0}")
        return [sys.executable, "-m", "taskscale.cli", "worker", *options, *own]

    # every option travels on the command line; the environment's defaults
    # for them must not add to it (--import would be imported twice)
    ours = {env_name(o) for a in parser._actions for o in a.option_strings if o.startswith("--")}
    env = {k: v for k, v in os.environ.items() if k not in ours}
    env[REDIS_URL_ENV] = args.redis_url
    env["POD_NAME"] = pod
    supervisor = Supervisor(
        processes=args.processes,
        base_id=base_id,
        command=command,
        return_tasks=dead_worker_requeue(client, keys),
        env=env,
    )
    on_stop_signals(supervisor.request_stop)
    for signum in early_signals:
        supervisor.request_stop(signum)
    log.info("%d worker processes in pod %s", args.processes, pod)
    return supervisor.run()
