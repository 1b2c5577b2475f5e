"""The non-hoarding consumer: runs registered task functions on N threads.

Shape of a worker process (docs/architecture.md has the longer story); this
module wires the parts, each in a module of its own:

* **claimer** threads (:mod:`taskscale.worker.claimer`), one per slot pool
  -- the only ones that take work.  Each claims exactly as many tasks as its
  pool has free slots, in one ``claim.lua`` call, so the backlog stays in
  Redis where the controller can see it.
* **executor** threads (N, here) -- run the function, encode the result, and
  pass the outcome on.
* with ``async def`` task types, an **event loop** thread
  (:mod:`taskscale.worker.async_executor`) runs up to ``async_slots`` of them at
  once, fed by a second claimer over those types only
  (:mod:`taskscale.worker.slot_pools`): each pool claims for its own free slots.
* **reporter** thread (:mod:`taskscale.worker.reporter`) -- records
  outcomes, one ``complete.lua`` call per wake, and renews the lease and the
  registry record every ``heartbeat_s``.

What the parts share -- the connection, keys, scripts, settings, the worker's
id, the tally, the outbox, the stop events -- is built once as a
:class:`~taskscale.worker.shared.Shared`; each part takes it plus only what
is its own.

Shutdown (SIGTERM/SIGINT, or :meth:`Worker.request_stop`;
:mod:`taskscale.worker.shutdown`): stop claiming, let running tasks finish
within ``grace_s``, flush their outcomes, then return whatever is still in
flight to the head of its queue and deregister, in one script.  A second
request, or the end of the grace period, cuts the wait short.  Redis
connection errors are retried with backoff; the worker keeps its running
tasks and resumes when Redis is back.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from taskscale import tracing
from taskscale.catalog import CatalogPublisher
from taskscale.errors import describe_error
from taskscale.health import METRICS_HOST, HealthState, MetricsServer
from taskscale.key_types import WrongKeys
from taskscale.keys import Keys, check_name
from taskscale.logs import worker_fields
from taskscale.luascripts import scripts_for
from taskscale.metrics import WorkerMetrics
from taskscale.redis_urls import RedisClient
from taskscale.signals import on_stop_signals
from taskscale.tasks import TaskRegistry
from taskscale.tasks import registry as default_registry
from taskscale.worker.async_executor import AsyncExecutor
from taskscale.worker.claim_pacing import ClaimPacer
from taskscale.worker.claimer import Claimer
from taskscale.worker.execution import Claimed, RetryPolicy, TaskRunner
from taskscale.worker.once import OnceBudget
from taskscale.worker.reporter import STOP, Reporter
from taskscale.worker.settings import WorkerSettings, default_worker_id
from taskscale.worker.shared import Shared
from taskscale.worker.shutdown import Shutdown
from taskscale.worker.slot_pools import ASYNC, SYNC, SlotPool, split_types

__all__ = ["RetryPolicy", "Worker", "WorkerSettings", "default_worker_id", "run_worker"]

log = logging.getLogger("taskscale.worker")

CLAIMER_NAMES = {SYNC: "claimer", ASYNC: "async-claimer"}


class Worker:
    """One worker process's runtime; :meth:`run` blocks until it has stopped."""

    def __init__(
        self,
        client: RedisClient,
        settings: WorkerSettings,
        *,
        keys: Keys | None = None,
        registry: TaskRegistry | None = None,
        metrics: WorkerMetrics | None = None,
        health: HealthState | None = None,
    ) -> None:
        self.redis = client
        self.settings = settings
        self.keys = Keys.or_env(keys)
        self.registry = registry or default_registry
        self.metrics = metrics
        self.health = health
        self.pod = settings.pod or os.environ.get("POD_NAME") or socket.gethostname()
        self.id = check_name("worker id", settings.worker_id or default_worker_id(self.pod))
        self._shared = shared = self._shared_parts()
        # held here too: the executors release a slot per task; tests drive the scripts
        self._scripts, self._tally = shared.scripts, shared.tally
        self._runner = self._task_runner()
        self._inbox: queue.SimpleQueue[Claimed | None] = queue.SimpleQueue()
        self._async = AsyncExecutor(
            self._runner, report=shared.outbox.put, released=lambda: self._released(ASYNC)
        )
        self._pools = self._slot_pools()
        slots = sum(pool.slots for pool in self._pools.values())
        self._reporter = Reporter(shared, slots, catalog=self._catalog())
        self._shutdown = Shutdown(shared)
        self._claimer = Claimer(
            shared, register=self._reporter.heartbeat, requeue=self._shutdown.requeue
        )
        self._exit_code = 0

    # --- wiring ------------------------------------------------------------------
    def _shared_parts(self) -> Shared:
        return Shared(
            client=self.redis,
            keys=self.keys,
            settings=self.settings,
            id=self.id,
            pod=self.pod,
            scripts=scripts_for(self.redis),
            on_fatal=self._fatal,
            once=OnceBudget(self.settings.once_wait_s) if self.settings.once else None,
            metrics=self.metrics,
            health=self.health,
            wrong_keys=WrongKeys(
                self.keys,
                who=f"worker {self.id}",
                count=self._count_wrong_key if self.metrics is not None else None,
            ),
        )

    def _count_wrong_key(self, key: str) -> None:
        if self.metrics is not None:
            self.metrics.wrong_type_keys.labels(key).inc()

    def _task_runner(self) -> TaskRunner:
        client, keys = self.redis, self.keys
        return TaskRunner(
            self.registry,
            worker_id=self.id,
            retry=self.settings.retry,
            max_lost=self.settings.max_lost,
            metrics=self.metrics,
            is_cancelled=lambda task_id: bool(client.exists(keys.cancel(task_id))),
            prefix=keys.prefix,
        )

    def _slot_pools(self) -> dict[str, SlotPool]:
        """The thread pool and the event-loop pool, each if it has types to run."""
        settings = self.settings
        sync_types, async_types = split_types(self.registry, settings.types)
        wanted: list[tuple[str, tuple[str, ...], int, Callable[[list[Claimed]], None]]] = [
            (SYNC, sync_types, settings.threads, self._to_threads),
            (ASYNC, async_types, settings.async_slots, self._async.submit),
        ]
        pools = {
            kind: SlotPool(kind, types, slots, self._pacer_for(types), dispatch)
            for kind, types, slots, dispatch in wanted
            if types
        }
        if self.metrics is not None:  # the pools it runs, counted like the busy gauge
            self.metrics.set_pools(
                threads=pools[SYNC].slots if SYNC in pools else 0,
                async_slots=pools[ASYNC].slots if ASYNC in pools else 0,
            )
        return pools

    def _pacer_for(self, types: tuple[str, ...]) -> ClaimPacer:
        return ClaimPacer(
            self.redis,
            self.keys,
            types,
            idle_wait_s=self.settings.idle_wait_s,
            stopping=self._shared.stopping,
        )

    def _catalog(self) -> CatalogPublisher:
        settings = self.settings
        return CatalogPublisher(
            self.redis, self.keys, self.id, self.registry, settings.types, lease_s=settings.lease_s
        )

    # --- public -------------------------------------------------------------
    @property
    def busy(self) -> int:
        return self._tally.busy

    def request_stop(self) -> None:
        """First call: graceful stop.  Second call: stop now."""
        stopping = self._shared.stopping
        if stopping.is_set():
            self._shared.forced.set()
        stopping.set()
        if self.health is not None:
            self.health.set_ready(False)
        for pool in self._pools.values():
            pool.freed.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT request a stop (call from the main thread)."""

        def handler(signum: int) -> None:  # on a thread: request_stop takes locks
            name = signal.Signals(signum).name
            log.info("worker %s: %s received", self.id, name, extra={"worker_id": self.id})
            self.request_stop()

        on_stop_signals(handler)

    def run(self) -> int:
        """Register, work until asked to stop, shut down gracefully; return 0
        (1 when it stopped on a Redis error that retrying can't fix)."""
        with worker_fields(self.id):  # every record of its threads names the worker
            return self._run()

    def _run(self) -> int:
        self._reporter.heartbeat()  # registered before the first claim
        sync = SYNC in self._pools
        threads = [
            _Thread(target=self._executor, name=f"executor-{i}", daemon=True)
            for i in range(self.settings.threads if sync else 0)
        ]
        reporter = _Thread(target=self._reporter.run, name="reporter", daemon=True)
        claimers = [
            _Thread(target=self._claimer.claim_loop, args=(pool,), name=CLAIMER_NAMES[kind])
            for kind, pool in self._pools.items()
        ]
        if ASYNC in self._pools:
            self._async.start()
        for thread in [*threads, reporter, *claimers]:
            thread.daemon = True
            thread.start()  # in a copy of this context (``_Thread``): the worker id
        log.info(
            "worker %s serving %s on %s",
            self.id,
            ",".join(self.settings.types),
            " + ".join(f"{p.slots} {k} slots" for k, p in self._pools.items()),
        )
        once = self._shared.once
        while not self._shared.stopping.wait(1.0 if once is None else 0.05):
            why = once.why_done(self._tally.busy) if once is not None else None
            if why is not None:  # --once: its one task has run, or none came
                log.info("worker %s: %s; exiting (--once)", self.id, why)
                self.request_stop()
        self._shutdown.drain()
        cancelled = self._async.cancel_running()
        if cancelled:
            log.info("worker %s: cancelled %d async task(s) at the grace end", self.id, cancelled)
        for claimer in claimers:
            claimer.join(self.settings.idle_wait_s + 1.0)
        for pool in self._pools.values():
            pool.pacer.close()
        self._reporter.outbox.put(STOP)
        reporter.join(10.0)
        self._shared.abandon.set()
        moved = self._shutdown.final_requeue()
        for _ in threads:
            self._inbox.put(None)
        self._async.stop()
        log.info(
            "worker %s stopped; %d unfinished task(s) returned to their queues", self.id, moved
        )
        return self._exit_code  # 1 after a Redis error retrying can't fix (_fatal)

    # --- failures ------------------------------------------------------------
    def _fatal(self, exc: BaseException) -> None:
        """A Redis error that retrying can't fix (e.g. WRONGTYPE): stop, exit 1."""
        log.error("worker %s: %s; stopping", self.id, describe_error(exc, client=self.redis))
        self._exit_code = 1
        self.request_stop()

    # --- executors ---------------------------------------------------------------
    def _to_threads(self, tasks: list[Claimed]) -> None:
        for task in tasks:
            self._inbox.put(task)

    def _executor(self) -> None:
        trace = tracing.current()  # None when off: the plain run, nothing per task
        run = self._runner.run if trace is None else trace.worker_run(self._runner.run, self.id)
        while True:
            task = self._inbox.get()
            if task is None:
                return
            try:
                self._reporter.outbox.put(run(task))
            except Exception as exc:  # a bug of ours: dead-letter rather than hold it forever
                log.exception("worker %s: could not run a %s task", self.id, task.task_type)
                self._reporter.outbox.put(self._runner.internal_error(task, exc))
            finally:
                self._released(SYNC)

    def _released(self, kind: str) -> None:
        self._tally.released(kind)
        self._pools[kind].freed.set()


class _Thread(threading.Thread):
    """A thread that runs in a copy of its creator's context, so its log
    records carry the worker id (:func:`~taskscale.logs.worker_fields`)."""

    def __init__(self, **kwargs: Any) -> None:
        context = contextvars.copy_context()
        target, args = kwargs.pop("target"), kwargs.pop("args", ())
        super().__init__(target=context.run, args=(target, *args), **kwargs)


def run_worker(
    client: RedisClient,
    settings: WorkerSettings,
    *,
    keys: Keys | None = None,
    metrics_port: int | None = None,
    on_ready: Callable[[Worker], None] | None = None,
) -> int:
    """Run a worker in this process with signal handling (the CLI's entry)."""
    metrics = WorkerMetrics(types=settings.types, threads=settings.threads)
    health = HealthState(
        clock=time.monotonic,
        stale_after_s=max(60.0, 3 * settings.lease_s),
        ready_stale_after_s=settings.lease_s,
    )
    if metrics_port is not None:  # /metrics, /healthz, /readyz
        MetricsServer(metrics.registry, health, host=METRICS_HOST, port=metrics_port).start()
    worker = Worker(client, settings, keys=keys, metrics=metrics, health=health)
    worker.install_signal_handlers()
    if on_ready is not None:
        on_ready(worker)
    return worker.run()
