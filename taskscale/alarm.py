"""Cut a blocking Redis read short at an exact time.

Redis 7.0 times out blocking commands (BLPOP) on its ``hz`` tick, 100 ms by
default: too coarse for a scheduler's due time or a rate limit's next token.
An :class:`Alarm` thread sends ``CLIENT UNBLOCK`` to the blocked connection
at the deadline, from another connection of the same client.
"""

from __future__ import annotations

import contextlib
import threading
import time

import redis

from taskscale.redis_urls import RedisClient


class Alarm:
    """Cuts a BLPOP short at a deadline with CLIENT UNBLOCK from a second connection."""

    def __init__(self, client: RedisClient, *, name: str = "alarm") -> None:
        self.client = client  #: on the blocked connection's server; replaced after a failover
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._target: int | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def arm(self, deadline: float, target_client_id: int) -> None:
        with self._cond:
            self._deadline, self._target = deadline, target_client_id
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:  # waits for an unblock in progress: it can't hit the next wait
            self._deadline = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._deadline = None
                with contextlib.suppress(redis.RedisError):  # else BLPOP ends a bit late
                    self.client.client_unblock(self._target or 0)
