"""Fewer round trips per task under a backlog: claims and outcome flushes
gathered over a moment.

A worker draining a backlog frees a slot every few tens of microseconds.
Claiming the moment each slot frees makes one ``claim.lua`` round trip (and
one claimer wake-up, one GIL hand-off) per task, and the reporter flushing
each outcome as it arrives makes one ``complete.lua`` call per task; on a
busy machine that bookkeeping, not the task bodies, is where the CPU goes.

A :class:`Gather` spaces such round trips at least ``interval_s`` apart, and
only while they come that fast: the claimer is held back only after a claim
that filled every free slot (the queues had more), the reporter only when
its previous flush was less than ``interval_s`` ago. So an idle or lightly
loaded worker claims and records at once, as before, and a busy one claims
for every slot freed during the moment in one call and records every outcome
finished during it in one call. Nothing else changes: a claim still asks
for exactly the free slots (never more: non-hoarding), and an outcome is
recorded at most ``interval_s`` later than it would have been.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Claims at least this far apart while the queues have a backlog: a freed
#: slot waits at most this long for its next task. 0: off. Measured on 2
#: cores with 2 workers x 8 threads of no-op tasks (docs/benchmarks.md), a
#: 0.5 ms spacing left slots idle and cost 10-15 % of the drain rate on a
#: quiet machine, and gained 5-7 % only under a load average of 4-13; a
#: claim taking exactly the free slots at once is the default again.
CLAIM_GATHER_S = 0.0
#: Outcome flushes at least this far apart while they come that fast. 4 ms,
#: not 1: with a task body that does I/O (one Redis INCR, a 1 ms sleep) a
#: 2 x 16-thread drain finished ~2.5 outcomes per process per millisecond,
#: so 1 ms flushes recorded two or three outcomes each, and the reporter's
#: wake-ups, round trips and GIL hand-offs cost the worker ~20 us per task;
#: 4 ms cut its CPU per task 15-30 % (issue 27, docs/benchmarks.md). An
#: outcome (an RPC reply, a fan-out slot, ACTIVE_TASKS) is recorded at most
#: this much later, and only while outcomes pour in.
FLUSH_GATHER_S = 0.004


class Gather:
    """Spaces one thread's round trips ``interval_s`` apart while it is busy."""

    def __init__(
        self,
        interval_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        self._last = float("-inf")
        self._held = False

    def pause(self) -> float:
        """Sleep out the rest of the interval since the last round trip, when
        that one said more work was waiting; return the seconds slept."""
        if not self._held or self.interval_s <= 0:
            return 0.0
        left = self._last + self.interval_s - self._clock()
        if left <= 0:
            return 0.0
        self._sleep(left)
        return left

    def done(self, *, more: bool) -> None:
        """A round trip was just made; ``more``: work was left waiting."""
        self._last = self._clock()
        self._held = more
