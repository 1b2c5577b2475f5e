"""What a worker process is told: :class:`WorkerSettings` (checked when
built, so a bad flag is one sentence) and the default worker id."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from taskscale.backoff import lease_cap
from taskscale.keys import DEFAULT_DEAD_LETTER_CAP, check_name
from taskscale.worker.execution import RetryPolicy

#: The longest wait between two attempts to reach Redis (a long lease's cap).
RECONNECT_CAP_S = 5.0


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker process is told (the CLI fills it from flags)."""

    types: tuple[str, ...]
    threads: int = 4
    #: Coroutines of ``async def`` tasks run at once on the event loop.
    async_slots: int = 100
    #: The lease: after this long without a heartbeat the reaper takes our tasks back.
    lease_s: float = 10.0
    heartbeat_s: float = 2.0
    #: How long running tasks may finish after the first SIGTERM.
    grace_s: float = 30.0
    #: Longest BLPOP on the wake lists while idle (a safety net: tokens wake us).
    idle_wait_s: float = 2.0
    worker_id: str | None = None
    pod: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: Most outcomes recorded by one complete.lua call.
    max_flush: int = 512
    #: A task whose worker died this many times while running it (reaped after
    #: its lease expired) is dead-lettered instead of run again: a poison pill
    #: that crashes or OOM-kills every worker must not cycle forever.
    max_lost: int = 5
    #: The most dead letters kept per type; older ones are dropped (and
    #: counted in the type's ``dead_dropped`` stat). 0 = no cap.
    dead_letter_cap: int = DEFAULT_DEAD_LETTER_CAP
    #: The most recently finished runs kept per type in ``recent:T`` (id,
    #: outcome, duration, finish time, result summary), written with the
    #: history once per heartbeat. 0 = none kept.
    recent_cap: int = 100
    #: ``--once``: claim one task, run it, record its outcome and exit (a
    #: Job pod's worker; taskscale.worker.once).
    once: bool = False
    #: With ``once``: how long to wait for that task before exiting without one.
    once_wait_s: float = 60.0

    @property
    def reconnect_cap_s(self) -> float:
        """The longest wait between two attempts to reach Redis again: a
        fraction of the lease (:func:`~taskscale.backoff.lease_cap`), so the
        heartbeat renews it soon after an outage shorter than the lease."""
        return lease_cap(RECONNECT_CAP_S, self.lease_s)

    def __post_init__(self) -> None:
        if not self.types:
            raise ValueError("a worker needs at least one task type (--types)")
        for task_type in self.types:
            check_name("task type", task_type)
        if self.threads < 1:
            raise ValueError("--threads must be at least 1")
        if self.async_slots < 1:
            raise ValueError("--async-slots must be at least 1")
        if not 0 < self.heartbeat_s < self.lease_s:
            raise ValueError("--heartbeat must be positive and shorter than --lease")
        if self.grace_s < 0 or self.idle_wait_s <= 0:
            raise ValueError("--grace must be >= 0 and the idle wait positive")
        if self.max_lost < 1:
            raise ValueError("--max-lost must be at least 1")
        if self.dead_letter_cap < 0:
            raise ValueError("--dead-letter-cap must be >= 0 (0 = no cap)")
        if self.once_wait_s <= 0:
            raise ValueError("--once-wait must be positive")
        if not 0 <= self.recent_cap <= 10_000:
            raise ValueError("--recent-cap must be 0..10000 (0 = keep none)")


def default_worker_id(pod: str) -> str:
    """``<pod>-<pid>-<random>``, made of the name alphabet."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in pod)[:96] or "worker"
    return f"{safe}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
