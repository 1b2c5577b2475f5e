"""The scheduler: promotes due delayed tasks, advances periodic schedules
and reaps dead workers.

``promote.lua`` moves every due task of every type to its ready list in one
atomic call and returns when the next one is due, so any number of
schedulers may run side by side with no lock and no duplicate.  Between
calls a scheduler sleeps until the next due time, and is woken early by a
token on ``{ns}:wake:scheduler`` (pushed when a task is scheduled earlier
than the current earliest).

Redis 7.0 times out blocking commands on its ``hz`` tick (100 ms by
default), far too coarse for a scheduler, so the sleep is a BLPOP with a
long timeout that an *alarm* thread cuts short at the exact due time with
``CLIENT UNBLOCK``; waits of a few milliseconds are plain sleeps.

After each promotion it materializes the next occurrence of every periodic
schedule whose current one is due (:mod:`taskscale.scheduling.schedules`; a
compare-and-set script, so concurrent schedulers enqueue each occurrence
once).  Every ``lease / 2`` seconds it also runs ``reap.lua``, which returns the
in-flight tasks of workers whose lease expired to the head of their queues,
and ``queued_recount.lua``, which fixes the per-type ready count of a type a
producer pushed to without counting (docs/schema.md, "The ready count"),
and every ``lease / 4`` seconds ``scheduler_beat.lua`` renews its entry in
``{ns}:schedulers`` so ``taskscale status`` can tell when none is running.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import redis

from taskscale import checks, history, tracing
from taskscale.alarm import Alarm as _Alarm
from taskscale.key_types import WrongKeys
from taskscale.keys import Keys, check_name
from taskscale.luascripts import bound_script, scripts_for
from taskscale.redis_urls import RedisClient, node_client
from taskscale.retrying import TRANSIENT_ERRORS, retrying
from taskscale.scheduling.schedules import advance_due
from taskscale.text import as_text
from taskscale.workflows.sweep import DEFAULT_LOST_AFTER_S, sweep

if TYPE_CHECKING:
    from taskscale.scheduling.scheduler_metrics import SchedulerMetrics

log = logging.getLogger("taskscale.scheduler")
T = TypeVar("T")


@dataclass(frozen=True)
class SchedulerSettings:
    #: Most tasks promoted per type per script call (bounds each call's run time).
    promote_batch: int = 1000
    #: Longest sleep without looking (a safety net: tokens wake us early).
    max_sleep_s: float = 1.0
    #: Waits shorter than this are plain sleeps (not worth an unblock).
    spin_s: float = 0.004
    #: Worker lease; the reaper runs every lease / 2.
    lease_s: float = 10.0
    #: Most workers reaped per call.
    reap_batch: int = 100
    #: A workflow step ready this long whose task is nowhere ends its workflow
    #: (taskscale.workflows.sweep, run with the reaper).
    workflow_lost_after_s: float = DEFAULT_LOST_AFTER_S

    def __post_init__(self) -> None:
        # 0 would be a busy loop on Redis (a reap every 0 s, a sleep of 0 s)
        checks.seconds("--max-sleep", self.max_sleep_s, positive=True)
        checks.seconds("--lease", self.lease_s, positive=True)
        checks.seconds("spin_s", self.spin_s)
        checks.whole("--batch", self.promote_batch, least=1)
        checks.whole("reap_batch", self.reap_batch, least=1)
        checks.seconds("workflow_lost_after_s", self.workflow_lost_after_s, positive=True)


@dataclass(frozen=True)
class PromoteResult:
    promoted: int
    next_due_ms: int | None  # None: nothing delayed
    now_ms: int
    more: bool
    #: How late the most overdue task promoted by this call was, ms (Redis clock).
    lateness_ms: int


class Scheduler:
    """Promoter + reaper loop; :meth:`run` until :meth:`stop`."""

    def __init__(
        self,
        client: RedisClient,
        *,
        keys: Keys | None = None,
        settings: SchedulerSettings | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.redis = client
        self.metrics = metrics
        self.keys = Keys.or_env(keys)
        self.settings = settings or SchedulerSettings()
        self._scripts = scripts_for(client)
        self._stop = threading.Event()
        # the BLPOP's own connection, to the server of the wake list (a cluster
        # node), so the alarm can unblock it from a second one to that server
        self._blocker: redis.Redis | None = None
        self._alarm: _Alarm | None = None
        self._blocking_id: int | None = None
        self.id = check_name(
            "scheduler id", f"{socket.gethostname()[:80]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        )
        self.wrong_keys = WrongKeys(
            self.keys,
            who=f"scheduler {self.id}",
            count=metrics.wrong_key if metrics is not None else None,
        )
        self.promoted = 0
        self.reaped_tasks = 0
        #: Schedule occurrences this scheduler materialized (taskscale.scheduling.schedules).
        self.occurrences = 0
        #: Lateness of the most overdue task of each promoting call, ms (recent ones).
        self.lateness_ms: deque[int] = deque(maxlen=100_000)

    def stop(self) -> None:
        """Ask :meth:`run` to return; cuts its current sleep short."""
        self._stop.set()
        alarm, target = self._alarm, self._blocking_id
        if alarm is not None and target is not None:
            alarm.arm(0.0, target)

    def promote(self) -> PromoteResult:
        """One promote.lua call over every type."""
        started = tracing.now_ns()
        reply = self._scripts.promote(
            keys=[self.keys.types],
            args=[self.keys.prefix, self.settings.promote_batch],
            client=self.redis,
        )
        promoted, next_due, now, more, late = (int(x) for x in reply[:5])
        for error in reply[5] if len(reply) > 5 else ():  # types skipped: a key of the wrong type
            self.wrong_keys.seen(redis.ResponseError(as_text(error)))
        trace = tracing.current()
        if promoted and trace is not None:
            trace.promotion(started, promoted, late)
        return PromoteResult(promoted, None if next_due < 0 else next_due, now, bool(more), late)

    def advance_schedules(self, now_ms: int) -> list[int]:
        """Materialize the next occurrence of each due schedule (see
        taskscale.scheduling.schedules); return the new occurrence times this call wrote."""
        advanced = advance_due(self.redis, self.keys, now_ms=now_ms)
        self.occurrences += len(advanced)
        if self.metrics is not None:
            for name, _ in advanced:
                self.metrics.occurrence(name)
        return [at for _, at in advanced]

    def reap(self) -> tuple[int, int]:
        """Reap expired workers until none is left; return (workers, tasks)."""
        workers = tasks = 0
        while True:
            reply = self._scripts.reap(
                keys=[self.keys.active, self.keys.workers],
                args=[self.keys.prefix, self.settings.reap_batch],
                client=self.redis,
            )
            workers += int(reply[0])
            tasks += int(reply[1])
            if not int(reply[2]):
                return workers, tasks

    def recount(self) -> tuple[int, int]:
        """Fix the QUEUED count of every type whose ready lists hold another
        number (a producer that pushed without counting); return (types
        repaired, tasks of drift) -- docs/schema.md, "The ready count"."""
        script = bound_script(self.redis, "queued_recount")
        reply = script(keys=[self.keys.types, self.keys.queued], args=[self.keys.prefix])
        _, repaired, drift = (int(x) for x in reply)
        return repaired, drift

    def beat(self, *, stopping: bool = False) -> int:
        """Renew this scheduler's entry in ``schedulers`` (or remove it);
        return how many schedulers are alive."""
        lease_ms = 0 if stopping else round(self.settings.lease_s * 1000)
        return int(
            self._scripts.scheduler_beat(
                keys=[self.keys.schedulers], args=[self.id, lease_ms], client=self.redis
            )
        )

    def run(self) -> int:
        # the alarm's client is set with the blocker's
        alarm = self._alarm = _Alarm(self.redis, name="scheduler-alarm")
        next_reap = next_beat = 0.0
        try:
            while not self._stop.is_set():
                if time.monotonic() >= next_beat:
                    alive = self._guarded(self.beat, 0)
                    if self.metrics is not None:
                        self.metrics.beat(alive)
                    next_beat = time.monotonic() + self.settings.lease_s / 4
                    self._sample_history()
                if time.monotonic() >= next_reap:
                    self._reap_logged()
                    next_reap = time.monotonic() + self.settings.lease_s / 2
                result = self._guarded(self.promote, PromoteResult(0, None, 0, False, 0))
                self.promoted += result.promoted
                if self.metrics is not None:
                    self.metrics.promoted(result.promoted, result.lateness_ms)
                if result.promoted:
                    self.lateness_ms.append(result.lateness_ms)
                advanced: list[int] = []
                if result.now_ms:  # 0: promote was refused (a key of the wrong type)
                    advanced = self._guarded(
                        functools.partial(self.advance_schedules, result.now_ms), []
                    )
                if result.more or any(at <= result.now_ms for at in advanced):
                    continue  # a caught-up occurrence is due already
                soonest = min(next_reap, next_beat) - time.monotonic()
                wait = min(self.settings.max_sleep_s, max(0.0, soonest))
                if result.next_due_ms is not None:
                    wait = min(wait, (result.next_due_ms - result.now_ms) / 1000)
                self._sleep(wait, alarm)
        except TRANSIENT_ERRORS:
            if not self._stop.is_set():
                raise
        finally:
            alarm.close()
            self._drop_blocker(alarm)
            with contextlib.suppress(redis.RedisError):
                self.beat(stopping=True)
        return 0

    def _sample_history(self) -> None:
        """Queued and running of every type into this 10 s history bucket
        (once per bucket across schedulers; a failure only leaves a gap)."""
        try:
            history.sample(self.redis, self.keys)
        except redis.RedisError as exc:
            log.warning("scheduler %s: history not sampled: %s", self.id, exc)

    def _reap_logged(self) -> None:
        workers, tasks = self._guarded(self.reap, (0, 0))
        self.reaped_tasks += tasks
        if self.metrics is not None:
            self.metrics.reaped(workers, tasks)
        if workers:
            log.warning("reaped %d dead worker(s); %d task(s) back in their queues", workers, tasks)
        repaired, drift = self._housekeeping(self.recount, (0, 0), "QUEUED recount")
        if self.metrics is not None:
            self.metrics.recounted(repaired)
        if repaired:
            log.info("QUEUED recount: %d type(s) fixed, %d task(s) of drift", repaired, drift)
        lost_after = self.settings.workflow_lost_after_s
        swept = self._housekeeping(
            lambda: sweep(self.redis, self.keys, lost_after_s=lost_after), None, "workflow sweep"
        )
        if swept is None:
            return
        if self.metrics is not None:
            self.metrics.workflows(swept)
        for workflow_id, reason in swept.ended:
            log.warning("workflow %s failed: %s", workflow_id, reason)

    def _housekeeping(self, fn: Callable[[], T], skipped: T, what: str) -> T:
        """A repair pass that a bad key must not turn into a stopped scheduler
        (issue 21): a wrong-typed key is reported as every script's is
        (:meth:`_guarded`); any other refusal is logged and the pass skipped
        until the next one -- promotion and reaping go on."""
        try:
            return self._guarded(fn, skipped)
        except redis.ResponseError as exc:
            log.error("%s skipped this pass: %s", what, exc)
            return skipped

    def _guarded(self, fn: Callable[[], T], refused: T) -> T:
        """``fn`` retried until stop; when a script refuses a key of the wrong
        type, that is reported (taskscale.key_types) and ``refused`` returned:
        the loop goes on, for every type the key does not concern."""
        try:
            return self._retrying(fn)
        except redis.ResponseError as exc:
            if self.wrong_keys.seen(exc) is None:
                raise
            return refused

    def _retrying(self, fn: Callable[[], T]) -> T:
        """``fn`` retried until stop, every failed attempt counted."""

        def counted() -> T:
            try:
                return fn()
            except TRANSIENT_ERRORS:
                if self.metrics is not None:
                    self.metrics.redis_error()
                raise

        return retrying(counted, give_up_when=self._stop.is_set)

    def _sleep(self, seconds: float, alarm: _Alarm) -> None:
        if seconds <= 0:
            return
        if seconds <= self.settings.spin_s:
            self._stop.wait(seconds)
            return
        try:
            blocker = self._blocker
            if blocker is None:
                blocker = self._blocker = node_client(self.redis, self.keys.scheduler_wake)
                alarm.client = node_client(self.redis, self.keys.scheduler_wake)
            # asked every time: a silent reconnect would change it
            self._blocking_id = int(blocker.client_id())
            if self._stop.is_set():  # stop() came before the id was known
                return
            alarm.arm(time.monotonic() + seconds, self._blocking_id)
            try:
                # Redis rounds this up to its next tick; the alarm ends it on time.
                blocker.blpop([self.keys.scheduler_wake], timeout=seconds + 0.5)
            finally:
                alarm.disarm()
        except TRANSIENT_ERRORS as exc:
            log.warning("scheduler: Redis unavailable (%s)", exc)
            self._drop_blocker(alarm)  # the wake list's server may have changed
            self._stop.wait(min(seconds, 0.5))

    def _drop_blocker(self, alarm: _Alarm) -> None:
        blocker, self._blocker = self._blocker, None
        for client in (blocker, alarm.client):
            if client is not None and client is not self.redis:
                with contextlib.suppress(redis.RedisError):
                    client.close()
        alarm.client = self.redis
