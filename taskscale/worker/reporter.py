"""A worker's reporter thread: records outcomes and renews the lease.

Every finished task waiting at the moment the reporter wakes is flushed in one
``complete.lua`` call (failures go through ``fail.lua``), so ACTIVE_TASKS
never lags more than one round trip behind the executors -- plus, while
outcomes pour in, at most ``gathering.FLUSH_GATHER_S`` (1 ms): flushes are
spaced that far apart then, so each one records many outcomes.  Every
``heartbeat_s`` it renews the worker's lease and registry record (busy slots,
per-type stats) and republishes the task catalog.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from taskscale.catalog import CatalogPublisher
from taskscale.health import HealthState
from taskscale.keys import Keys
from taskscale.luascripts import Scripts
from taskscale.metrics import WorkerMetrics
from taskscale.redis_urls import RedisClient
from taskscale.retrying import TRANSIENT_ERRORS, retrying
from taskscale.worker.execution import Outcome
from taskscale.worker.gathering import FLUSH_GATHER_S, Gather
from taskscale.worker.settings import WorkerSettings
from taskscale.worker.tally import Tally

log = logging.getLogger("taskscale.worker.runtime")

#: Put on the outbox to make the reporter flush what it has and return.
STOP = object()


@dataclass
class Identity:
    """Who the worker is, as its registry record says."""

    id: str
    pod: str
    slots: int  #: threads (and async slots) it runs tasks on


class Reporter:
    """Owns the outbox; :meth:`run` is the reporter thread's body."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        settings: WorkerSettings,
        identity: Identity,
        *,
        scripts: Scripts,
        tally: Tally,
        catalog: CatalogPublisher,
        stopping: threading.Event,
        abandon: threading.Event,
        on_fatal: Callable[[BaseException], None],
        metrics: WorkerMetrics | None = None,
        health: HealthState | None = None,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings
        self.identity = identity
        self.outbox: queue.SimpleQueue[Outcome | object] = queue.SimpleQueue()
        self._scripts = scripts
        self._tally = tally
        self._catalog = catalog
        self._stopping = stopping
        self._abandon = abandon
        self._on_fatal = on_fatal
        self._metrics = metrics
        self._health = health
        self._inflight_key = keys.inflight(identity.id)

    def run(self) -> None:
        next_beat = time.monotonic() + self.settings.heartbeat_s
        gather = Gather(FLUSH_GATHER_S)  # one flush per moment while outcomes pour in
        while True:
            pending: list[Outcome] = []
            stop = False
            try:
                item = self.outbox.get(timeout=max(0.0, next_beat - time.monotonic()))
                gather.pause()
                while True:
                    if item is STOP:
                        stop = True
                        break
                    assert isinstance(item, Outcome)
                    pending.append(item)
                    if len(pending) >= self.settings.max_flush:
                        break
                    item = self.outbox.get_nowait()
            except queue.Empty:
                pass
            if pending:
                gather.done(more=True)
                try:
                    retrying(partial(self.record, pending), give_up_when=self._abandon.is_set)
                except redis.RedisError as exc:
                    if not isinstance(exc, TRANSIENT_ERRORS):
                        self._on_fatal(exc)
                    log.error(
                        "worker %s: %d outcome(s) not recorded: %s",
                        self.identity.id,
                        len(pending),
                        exc,
                    )
            if stop:
                return
            if time.monotonic() >= next_beat and not self._abandon.is_set():
                next_beat = time.monotonic() + self.settings.heartbeat_s
                try:
                    retrying(self.heartbeat, give_up_when=self._stopping.is_set)
                except redis.RedisError as exc:
                    if not isinstance(exc, TRANSIENT_ERRORS):
                        self._on_fatal(exc)

    def record(self, outcomes: list[Outcome]) -> None:
        """Record ``outcomes`` in Redis: completions in one call, then each failure."""
        keys = [self.keys.active, self.keys.idle_since, self._inflight_key, self.keys.limits]
        done = [o for o in outcomes if o.kind == "ok"]
        if done:
            args: list[Any] = [self.keys.prefix, len(done)]
            for o in done:
                args += [o.task_id, o.task_type, o.service_ms, o.reply_to, o.reply_ttl]
                args += [o.reply, o.fanout]
            self._scripts.complete(keys=keys, args=args, client=self.redis)
        for o in outcomes:
            fail_args: list[str | int]
            if o.kind == "retry":
                fail_args = [o.backoff_ms, o.retry_envelope, "", 0, "", ""]
            elif o.kind == "dead":
                fail_args = [0, o.error, o.reply_to, o.reply_ttl, o.reply, o.fanout]
                fail_args += [self.settings.dead_letter_cap, o.traceback]
            else:
                continue
            self._scripts.fail(
                keys=keys,
                args=[self.keys.prefix, o.task_id, o.task_type, o.service_ms, o.kind, *fail_args],
                client=self.redis,
            )
        self._tally.recorded(
            (o.task_id, o.task_type, o.kind == "ok", o.service_ms) for o in outcomes
        )

    def heartbeat(self) -> None:
        """Renew the lease and the registry record; republish the catalog."""
        busy, stats = self._tally.snapshot()
        if self._metrics is not None:
            self._metrics.busy.set(busy)
        record = {
            "id": self.identity.id,
            "pod": self.identity.pod,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "types": ",".join(self.settings.types),
            "threads": self.identity.slots,
            "busy": busy,
            "stats": json.dumps(stats, separators=(",", ":")),
        }
        args: list[Any] = [self.identity.id, round(self.settings.lease_s * 1000)]
        for name, value in record.items():
            args += [name, value]
        self._scripts.heartbeat(
            keys=[self.keys.workers, self.keys.worker(self.identity.id)],
            args=args,
            client=self.redis,
        )
        self._catalog.publish()
        if self._health is not None:  # the lease is renewed: alive, ready unless stopping
            self._health.beat()
            self._health.set_ready(not self._stopping.is_set())
