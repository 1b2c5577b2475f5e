"""A worker's shutdown: the grace period, and what is left returned to Redis.

On a stop request the claimers stop first; :meth:`Shutdown.drain` then waits
for the running tasks -- until none is left, the grace period is over, or a
second request forces it -- and, once the reporter has recorded what
finished, :meth:`Shutdown.final_requeue` returns every task still in the
worker's in-flight hash to the head of its queue and deregisters the worker,
in one ``requeue.lua`` call (its *final* mode).  The same script's *some*
mode returns the tasks a lost claim reply left behind
(:mod:`taskscale.worker.claimer`).
"""

from __future__ import annotations

import logging
import time

from taskscale.retrying import TRANSIENT_ERRORS, retrying
from taskscale.worker.shared import Shared

log = logging.getLogger("taskscale.worker")

#: How long the final requeue keeps retrying an unreachable Redis.
FINAL_REQUEUE_RETRY_S = 10.0


class Shutdown:
    """Draining and returning the tasks of one worker."""

    def __init__(self, shared: Shared) -> None:
        self.redis = shared.client
        self.keys = shared.keys
        self.worker_id = shared.id
        self._scripts = shared.scripts
        self._tally = shared.tally
        self._grace_s = shared.settings.grace_s
        self._forced = shared.forced

    def drain(self) -> None:
        """Wait for running tasks, up to the grace period or a forced stop."""
        deadline = time.monotonic() + self._grace_s
        log.info(
            "worker %s: stopping; waiting up to %.0fs for %d task(s)",
            self.worker_id,
            self._grace_s,
            self._tally.busy,
        )
        while self._tally.busy > 0 and not self._forced.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._forced.wait(min(remaining, 0.05))  # polled: nothing on the hot path

    def requeue(self, mode: str, ids: list[str]) -> int:
        """One ``requeue.lua`` call: ``final`` (everything, and deregister) or
        ``some`` (the ``ids``); how many tasks went back to their queues."""
        return int(
            self._scripts.requeue(
                keys=[
                    self.keys.active,
                    self.keys.workers,
                    self.keys.inflight(self.worker_id),
                    self.keys.worker(self.worker_id),
                ],
                args=[self.keys.prefix, self.worker_id, mode, *ids],
                client=self.redis,
            )
        )

    def final_requeue(self) -> int:
        """Return what is left and deregister; 0 (the reaper's job) when Redis
        stays unreachable for :data:`FINAL_REQUEUE_RETRY_S`."""
        try:
            return retrying(
                lambda: self.requeue("final", []), give_up_after_s=FINAL_REQUEUE_RETRY_S
            )
        except TRANSIENT_ERRORS as exc:
            log.error(
                "worker %s: Redis unreachable at shutdown (%s); the reaper will return "
                "its tasks when the lease expires",
                self.worker_id,
                exc,
            )
            return 0
