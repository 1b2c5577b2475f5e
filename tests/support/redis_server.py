"""A real ``redis-server`` on a free loopback port, for tests and benchmarks.

No fakeredis: the Lua scripts, blocking pops and pub/sub are exactly what we
ship, so they are tested against the server that runs them in production.
The launcher is the one ``taskscale demo`` ships
(:class:`taskscale.demo.localredis.LocalRedis`); tests add only
``restart`` on the same port, to exercise reconnection.
"""

from __future__ import annotations

from taskscale.demo.localredis import LocalRedis, LocalRedisSettings, free_loopback_port

#: A TCP port on 127.0.0.1 that was free a moment ago.
free_port = free_loopback_port


class RedisServer(LocalRedis):
    """One redis-server process; ``url`` points at it.  Use as a context manager."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(LocalRedisSettings(port=port))

    def restart(self) -> None:
        """Stop and start again on the same port (no persistence: the data is gone)."""
        self.stop()
        self.start()
