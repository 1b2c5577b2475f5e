"""Where a worker's claimer waits when its last claim left work behind.

``claim.lua`` names the rate-limited types that still have ready tasks but
no token, with the milliseconds until their next token.  Waiting on such a
type's wake list would wake the claimer for nothing (every enqueue pushes a
token), and sleeping until its refill would keep the worker's *other* types
waiting.  So the :class:`ClaimPacer` blocks on the wake lists of the types
that may be claimed now, only until the earliest refill, then the claimer
claims again with every type.

Redis 7.0 ends a BLPOP on its 100 ms tick, which would lose up to a tenth of
a second of a 10/s limit each time, so a refill wait is cut short on time by
an :class:`~taskscale.alarm.Alarm` (``CLIENT UNBLOCK`` from a second
connection).  With nothing held back the wait is the worker's plain BLPOP.

A type at its concurrency cap is *not* held back: a finished task of a
capped type pushes a wake token (complete / fail), so its wake list is the
signal that a slot is free.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

import redis

from taskscale.alarm import Alarm
from taskscale.keys import Keys
from taskscale.redis_urls import RedisClient, node_client
from taskscale.text import as_text

#: Waits this short are plain sleeps (not worth an unblock).
SPIN_S = 0.004


class ClaimPacer:
    """Reads the claim reply's header and sleeps between claims."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        types: Sequence[str],
        *,
        idle_wait_s: float,
        stopping: threading.Event,
    ) -> None:
        self._client = client
        self._keys = keys
        self._types = tuple(types)
        self._idle_wait_s = idle_wait_s
        self._stopping = stopping
        self._held: dict[str, float] = {}  # type -> monotonic time of its next token
        self._blocker: redis.Redis | None = None
        self._alarm: Alarm | None = None

    @property
    def held(self) -> dict[str, float]:
        """Rate-limited types waiting for a token -> when it comes (monotonic)."""
        return dict(self._held)

    def header(self, reply: Sequence[Any]) -> int:
        """Note the held-back types of an "ok" claim reply; return where its tasks start."""
        text = as_text(reply[2])
        now = time.monotonic()
        held: dict[str, float] = {}
        for item in filter(None, text.split(",")):
            name, _, ms = item.partition("=")
            held[name] = now + int(ms) / 1000
        self._held = held
        return 3

    def sleep(self, skip: Collection[str] = ()) -> None:
        """Block until a wake token, the next token of a held type, or the idle
        wait; ``skip``: types not to listen for (a key of theirs has the wrong type)."""
        now = time.monotonic()
        self._held = {t: at for t, at in self._held.items() if at > now}
        listen = [self._keys.wake(t) for t in self._types if t not in self._held and t not in skip]
        if not listen and not self._held:
            self._stopping.wait(self._idle_wait_s)
            return
        if not self._held:
            self._client.blpop(listen, timeout=self._idle_wait_s)
            return
        wait = min(self._idle_wait_s, min(self._held.values()) - now)
        if not listen or wait <= SPIN_S:
            self._stopping.wait(wait)
            return
        self._timed_blpop(listen, wait)

    def _timed_blpop(self, listen: list[str], wait: float) -> None:
        # Its own connection to the server of the wake lists (one hash tag: one
        # server, also on a cluster), so the alarm can unblock it from another.
        if self._alarm is None:
            self._alarm = Alarm(self._client, name="claim-alarm")
        if self._blocker is None:
            self._blocker = node_client(self._client, listen[0])
            self._alarm.client = node_client(self._client, listen[0])
        try:
            target = int(self._blocker.client_id())  # asked every time: a reconnect changes it
            self._alarm.arm(time.monotonic() + wait, target)
            try:
                self._blocker.blpop(listen, timeout=wait + 0.5)
            finally:
                self._alarm.disarm()
        except redis.RedisError:
            self._close_blocker()  # the wake lists' server may have changed
            raise

    def _close_blocker(self) -> None:
        blocker, self._blocker = self._blocker, None
        for client in (blocker, self._alarm.client if self._alarm else None):
            if client is not None and client is not self._client:
                client.close()
        if self._alarm is not None:
            self._alarm.client = self._client

    def close(self) -> None:
        if self._alarm is not None:
            self._alarm.close()
        self._close_blocker()
