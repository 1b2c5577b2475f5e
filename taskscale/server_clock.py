"""The Redis server's clock, read from Python.

Every time taskscale stores (leases, due times, stamps) is the Redis
server's, read by the scripts (``scripts/lib/clock.lua``), so Python code
that compares a time with them reads the same clock, through this one
function.  It is a script call (``server_time.lua``) routed by a key of the
namespace: a cluster client would send a plain ``TIME`` to any node, and a
cluster pipeline takes neither ``TIME`` nor ``EVAL``.
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
    return ServerTime(int(seconds), int(micros))
