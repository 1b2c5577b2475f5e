"""The Redis server's clock, read from Python.

Every time taskscale stores (leases, due times, stamps) is the Redis
server's, read by the scripts (``scripts/lib/clock.lua``), so Python code
that compares a time with them reads the same clock, through this one
function.  It is a script call (``server_time.lua``) routed by a key of the
namespace: a cluster client would send a plain ``TIME`` to any node, and a
cluster pipeline takes neither ``TIME`` nor ``EVAL``.  A script that reads
the clock along with other data (the controller's observers) hands its
``TIME`` pair to :meth:`ServerTime.from_reply`: one conversion for all.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient


@dataclass(frozen=True)
class ServerTime:
    """One reading of the server's clock, as ``TIME`` gives it."""

    seconds: int
    micros: int

    @classmethod
    def from_reply(cls, seconds: int | str | bytes, micros: int | str | bytes) -> ServerTime:
        """A ``TIME`` pair as a script returns it (integers, or their text)."""
        return cls(int(seconds), int(micros))

    @property
    def ms(self) -> int:
        """Unix ms, whole: what the scripts call ``now``."""
        return self.seconds * 1000 + self.micros // 1000

    @property
    def unix_s(self) -> float:
        """Unix seconds, to the µs."""
        return self.seconds + self.micros / 1e6


def server_time(client: RedisClient, keys: Keys) -> ServerTime:
    """The clock of the server holding ``keys``' namespace."""
    seconds, micros = bound_script(client, "server_time")(keys=[keys.types], client=client)
    return ServerTime.from_reply(seconds, micros)
