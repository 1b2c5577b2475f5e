"""A worker's reporter thread: records outcomes and renews the lease.

Every finished task waiting at the moment the reporter wakes is flushed in one
``complete.lua`` call (failures go through ``fail.lua``), so ACTIVE_TASKS
never lags more than one round trip behind the executors -- plus, while
outcomes pour in, at most ``gathering.FLUSH_GATHER_S`` (4 ms): flushes are
spaced that far apart then, so each one records many outcomes.  Every
``heartbeat_s`` it renews the worker's lease and registry record (busy slots,
per-type stats), republishes the task catalog and adds what it counted
since to the types' history (taskscale.history: one call for every type).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from taskscale import history
from taskscale.catalog import CatalogPublisher
from taskscale.key_types import WrongKeys
from taskscale.retrying import TRANSIENT_ERRORS, retrying
from taskscale.worker.execution import Outcome
from taskscale.worker.gathering import FLUSH_GATHER_S, Gather
from taskscale.worker.shared import Shared

log = logging.getLogger("taskscale.worker")

#: A run's outcome as the recent-runs record names it.
_OUTCOMES = {"ok": "completed", "retry": "retried", "dead": "dead"}

#: Put on the outbox to make the reporter flush what it has and return.
STOP = object()


@dataclass
class Identity:
    """Who the worker is, as its registry record says."""

    id: str
    pod: str
    slots: int  #: threads (and async slots) it runs tasks on


class Reporter:
    """Empties the outbox; :meth:`run` is the reporter thread's body."""

    def __init__(self, shared: Shared, slots: int, *, catalog: CatalogPublisher) -> None:
        """``slots``: the threads and async slots the worker runs tasks on."""
        self.redis = shared.client
        self.keys = shared.keys
        self.settings = shared.settings
        self.identity = Identity(shared.id, shared.pod, slots)
        self.outbox = shared.outbox
        self._scripts = shared.scripts
        self._tally = shared.tally
        self._catalog = catalog
        self._stopping = shared.stopping
        self._abandon = shared.abandon
        self._on_fatal = shared.on_fatal
        self._metrics = shared.metrics
        self._health = shared.health
        self._inflight_key = shared.keys.inflight(shared.id)
        self._wrong = shared.wrong_keys or WrongKeys(shared.keys, who=f"worker {shared.id}")
        #: Outcomes held back by a key of the wrong type: recorded again each heartbeat.
        self._parked: list[Outcome] = []
        self._history = history.Batch(recent_cap=shared.settings.recent_cap)  # this thread's alone

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
            if pending or (stop and self._parked):
                gather.done(more=True)
                try:
                    self._record_what_can_be(pending)
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
                self._write_history()
                return
            if time.monotonic() >= next_beat and not self._abandon.is_set():
                self._write_history()
                next_beat = time.monotonic() + self.settings.heartbeat_s
                try:
                    retrying(  # soon after an outage: before the lease expires
                        self.heartbeat,
                        give_up_when=self._stopping.is_set,
                        max_wait_s=self.settings.reconnect_cap_s,
                    )
                    if self._parked:
                        self._record_what_can_be([])
                except redis.RedisError as exc:
                    if not isinstance(exc, TRANSIENT_ERRORS) and self._wrong.seen(exc) is None:
                        self._on_fatal(exc)

    def _record_what_can_be(self, outcomes: list[Outcome]) -> None:
        """Record ``outcomes`` and those parked before, but for the types a key
        of the wrong type holds back (parked: their tasks stay in flight, under
        this worker's lease, until the key is fixed); a wrong-typed reply key
        loses only that task's reply (taskscale.key_types)."""
        todo, self._parked = self._parked + outcomes, []
        for _ in range(len(todo) + 2):  # each refusal holds back a type or drops a reply
            held = self._wrong.held({o.task_type for o in todo})
            self._parked += [o for o in todo if o.task_type in held]
            todo = [o for o in todo if o.task_type not in held]
            if not todo:
                return
            try:
                retrying(
                    partial(self.record, todo),
                    give_up_when=self._abandon.is_set,
                    max_wait_s=self.settings.reconnect_cap_s,
                )
                return
            except redis.ResponseError as exc:
                found = self._wrong.seen(exc)
                if found is None:
                    raise
                if found.reply:
                    for o in todo:
                        if o.reply_to == found.key:
                            o.reply_to = ""
        self._parked += todo  # never reached in practice: kept, not lost

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
        batch = self._history
        finished_ms = round(time.time() * 1000)
        for o in outcomes:
            batch.add(o.task_type, o.kind, o.service_ms, o.wait_ms)
            if batch.recent_cap:
                result = o.summary if o.kind == "ok" else o.error[:200]
                run = (o.task_id, _OUTCOMES[o.kind], o.service_ms, finished_ms, result)
                batch.finished(o.task_type, run)

    def _write_history(self) -> None:
        """Add the counts since the last write to the history; when Redis is
        away they wait for the next beat (history never stalls the reporter;
        the batch is bounded by types x fields, not by tasks)."""
        try:
            history.write(self.redis, self.keys, self._history)
        except redis.RedisError as exc:
            log.warning("worker %s: history not written: %s", self.identity.id, exc)

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
            "running": json.dumps(self._tally.held_since(), separators=(",", ":")),
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
