"""A worker's claimers: the only threads that take work from Redis.

Each slot pool (:mod:`taskscale.worker.slot_pools`) has one claimer thread running
:meth:`Claimer.claim_loop`.  It claims exactly as many tasks as its pool has
free slots, in one ``claim.lua`` call, and hands each to the pool's dispatch
(an executor thread, or the event loop).  Nothing waits inside the process:
a slot is filled only by a claim made for a slot that is free right now, so
the backlog stays in Redis where the controller can see it.  When the queues
are empty it sleeps on the wake lists of its types (``ClaimPacer``); when
every slot is busy it waits for one to free up, without touching Redis.
Under a backlog claims may be spaced :data:`~taskscale.worker.gathering.CLAIM_GATHER_S`
apart (``gathering.py``; 0, off, by default: spacing left slots idle).

A connection error is retried with backoff; since the script may have run
and only its reply been lost, the claimer then compares the worker's
in-flight hash with what it holds and returns the difference
(:meth:`Claimer.reconcile`).  A reply saying the worker is not registered
(its lease expired and the reaper took its tasks) re-registers it.  A reply
saying the worker's pod is draining (the controller saw its node cordoned or
tainted for removal: ``{ns}:draining``) makes the claimer ask again every
:data:`DRAIN_POLL_S` without claiming, while the running tasks finish.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis

from taskscale.backoff import exponential, spread
from taskscale.key_types import WrongKeys
from taskscale.retrying import TRANSIENT_ERRORS, retrying
from taskscale.text import as_text
from taskscale.worker.execution import Claimed
from taskscale.worker.gathering import CLAIM_GATHER_S, Gather
from taskscale.worker.shared import Shared
from taskscale.worker.slot_pools import SlotPool

log = logging.getLogger("taskscale.worker")

#: Seconds between two claims of a worker whose pod is draining (it claims
#: nothing; the next claim says whether the drain flag was cleared).
DRAIN_POLL_S = 1.0


class Claimer:
    """The claim loop shared by a worker's pools (one thread per pool)."""

    def __init__(
        self,
        shared: Shared,
        *,
        register: Callable[[], None],
        requeue: Callable[[str, list[str]], int],
    ) -> None:
        self.redis = shared.client
        self.keys = shared.keys
        self.worker_id = shared.id
        self._pod = shared.pod
        self._draining = False  # the last claim said the pod drains (logged once)
        self._scripts = shared.scripts
        self._tally = shared.tally
        self._stopping = shared.stopping
        self._register = register  # the reporter's heartbeat: lease + registry record
        self._requeue = requeue  # requeue.lua (shutdown.Shutdown.requeue)
        self._on_fatal = shared.on_fatal
        # an envelope it can't take is a dead letter
        self._dead_letter_cap = shared.settings.dead_letter_cap
        self._metrics = shared.metrics
        self._inflight_key = shared.keys.inflight(shared.id)
        self._lock = threading.Lock()  # claims vs a lost reply's reconcile
        self._retry_cap_s = shared.settings.reconnect_cap_s  # a fraction of the lease
        self._wrong = shared.wrong_keys or WrongKeys(shared.keys, who=f"worker {shared.id}")
        self._budget = shared.once  # --once: one task in all (taskscale.worker.once)

    def claim_loop(self, pool: SlotPool) -> None:
        """A claimer thread's body: claim for ``pool`` until the worker stops."""
        failures = 0
        gather = Gather(CLAIM_GATHER_S)  # claims spaced apart under a backlog
        while not self._stopping.is_set():
            gather.pause()
            pool.freed.clear()
            free = pool.slots - self._tally.busy_in(pool.kind)
            if self._budget is not None:
                free = self._budget.reserve(pool.kind, free)
            if free <= 0:
                pool.freed.wait(1.0)
                continue
            try:
                got = self._claim_reserved(pool, free)
                gather.done(more=got == free)
                if got < free and not self._stopping.is_set():
                    # wake lists; not past a held type's next token; not a wrong-typed key's
                    pool.pacer.sleep(skip=self._wrong.held(pool.types))
                failures = 0
            except TRANSIENT_ERRORS as exc:
                failures += 1
                self._redis_trouble(exc, failures)
                self.reconcile()
            except redis.RedisError as exc:
                if self._wrong.seen(exc) is None:  # else: its type held back, the rest go on
                    self._on_fatal(exc)

    def _claim_reserved(self, pool: SlotPool, free: int) -> int:
        """:meth:`claim`, then --once's reservation released if no task came."""
        try:
            return self.claim(pool, free)
        finally:
            if self._budget is not None:
                self._budget.settle(pool.kind, 0)

    def claim(self, pool: SlotPool, free: int) -> int:
        """One ``claim.lua`` call for up to ``free`` tasks of ``pool``'s types;
        how many were claimed (``free`` after a re-registration: try again)."""
        held = self._wrong.held(pool.types)
        types = [t for t in pool.rotated_types() if t not in held]
        if not types:  # every type held back by a key of the wrong type
            return 0
        with self._lock:  # a reconcile must not see a claim between script and tally
            reply = self._scripts.claim(
                keys=[self.keys.active, self.keys.workers, self._inflight_key, self.keys.limits],
                args=[
                    self.keys.prefix,
                    self.worker_id,
                    free,
                    self._dead_letter_cap,
                    *types,
                ],
                client=self.redis,
            )
            return self.received(pool, free, reply)

    def received(self, pool: SlotPool, free: int, reply: list[bytes]) -> int:
        if reply[0] == b"unregistered":
            if self._stopping.is_set():
                return 0
            log.warning("worker %s: lease lost (reaped?); registering again", self.worker_id)
            self._register()
            return free  # try again at once
        if reply[0] == b"draining":  # the pod's node drains: claim nothing, ask again later
            if not self._draining:
                log.info(
                    "worker %s: pod %s is draining; claiming nothing", self.worker_id, self._pod
                )
            self._draining = True
            self._stopping.wait(DRAIN_POLL_S)
            return free
        if self._draining:
            log.info(
                "worker %s: pod %s no longer draining; claiming again", self.worker_id, self._pod
            )
        self._draining = False
        now_ms = int(reply[1])
        claimed = [
            Claimed(reply[i].decode(), reply[i + 1].decode(), reply[i + 2], now_ms)
            for i in range(pool.pacer.header(reply), len(reply), 3)
        ]
        if self._budget is not None:
            self._budget.settle(pool.kind, len(claimed))
        if claimed:
            self._tally.claimed((task.task_id for task in claimed), pool.kind, now_ms)
            pool.dispatch(claimed)
        return len(claimed)

    def _redis_trouble(self, exc: BaseException, failures: int) -> None:
        if self._metrics is not None:
            self._metrics.redis_errors.inc()
        delay = spread(exponential(failures, base_s=0.05, cap_s=self._retry_cap_s), 0.2)
        log.warning(
            "worker %s: Redis unavailable (%s); retrying in %.2fs", self.worker_id, exc, delay
        )
        self._stopping.wait(delay)

    def reconcile(self) -> None:
        """After a lost claim reply, return tasks the script recorded for us
        but we never received (in our in-flight hash, unknown to us)."""

        def orphans() -> int:
            with self._lock:
                held = self.redis.hkeys(self._inflight_key)
                lost = self._tally.not_held(as_text(i) for i in held)
                return int(self._requeue("some", lost)) if lost else 0

        moved = retrying(orphans, give_up_when=self._stopping.is_set, max_wait_s=self._retry_cap_s)
        if moved:
            log.warning(
                "worker %s: returned %d task(s) from a lost claim reply", self.worker_id, moved
            )
