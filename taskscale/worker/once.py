"""``taskscale worker --once``: one task, then exit -- a Job pod's worker.

A Job-mode TaskScaler (docs/operating.md, "Job mode") starts one Kubernetes
Job per task; its pod runs ``taskscale worker --once``.  Such a worker is a
normal worker (the same claimer, executors, reporter, lease, registry record
and shutdown) with a claim budget of one: :class:`OnceBudget` lets exactly one
claim of one task through, across the worker's slot pools, and tells the
worker's main loop when to stop -- as soon as that task's slot is free again
(its outcome is queued for the reporter, which records it before the worker
deregisters), or when no task came within ``once_wait_s``.  A SIGTERM in the
middle of the task is the normal grace; a SIGKILL leaves the task to the
reaper through the lease, as with any worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class OnceBudget:
    """At most one task claimed by one worker, and when that worker is done."""

    def __init__(self, wait_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._deadline = clock() + wait_s
        self._lock = threading.Lock()
        self._reserved: str | None = None  # the pool whose claim for the one task is under way
        self.claimed = 0
        self._closed = False  # no task came in time: no claim may start any more

    def reserve(self, pool: str, free: int) -> int:
        """How many tasks ``pool``'s claimer may claim now (0 or 1 of its
        ``free``); a 1 must be followed by :meth:`settle` from that claimer."""
        with self._lock:
            if free <= 0 or self.claimed or self._closed or self._reserved is not None:
                return 0
            self._reserved = pool
            return 1

    def settle(self, pool: str, claimed: int) -> None:
        """``pool``'s reserved claim got ``claimed`` tasks (0: the budget is
        open again); a no-op when ``pool`` holds no reservation."""
        with self._lock:
            if self._reserved == pool:
                self.claimed += claimed
                self._reserved = None

    def why_done(self, busy: int) -> str | None:
        """Why the worker should stop now (a log line's end), or None: its
        one task has run (``busy`` is 0 again), or none came in time -- then
        the budget closes, so no claim starts between this answer and the
        stop (one under way keeps the answer None until it settles)."""
        with self._lock:
            if self.claimed:
                return "ran its one task" if busy == 0 else None
            if self._reserved is not None or self._clock() < self._deadline:
                return None
            self._closed = True
            return "no task came within --once-wait"
