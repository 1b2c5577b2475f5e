"""A real ``redis-server`` on a free loopback port, for tests and benchmarks.

No fakeredis: the Lua scripts, blocking pops and pub/sub are exactly what we
ship, so they are tested against the server that runs them in production.
The launcher is the one ``taskscale demo`` ships
(:class:`taskscale.demo.localredis.LocalRedis`); tests add only
``restart`` on the same port, to exercise reconnection (with the data kept
when the server was given a ``data_dir``: a Redis restarted with persistence).
"""

from __future__ import annotations

import time
from pathlib import Path

from taskscale.connection import connect
from taskscale.demo.localredis import LocalRedis, LocalRedisSettings, free_loopback_port

#: A TCP port on 127.0.0.1 that was free a moment ago.
free_port = free_loopback_port


class RedisServer(LocalRedis):
    """One redis-server process; ``url`` points at it.  Use as a context manager."""

    def __init__(self, port: int = 0, *, data_dir: Path | None = None) -> None:
        super().__init__(LocalRedisSettings(port=port))
        self.data_dir = data_dir

    def _server_args(self) -> list[str]:
        args = super()._server_args()
        # the last --dir wins: the snapshot outlives the server's own temp dir
        return [*args, "--dir", str(self.data_dir)] if self.data_dir is not None else args

    def restart(self, *, down_s: float = 0.0) -> None:
        """Stop, stay down ``down_s`` seconds, start again on the same port.
        With a ``data_dir`` the data is saved first and loaded again (a
        restart with persistence); without, it is gone."""
        if self.data_dir is not None:
            client = connect(self.url)
            client.save()
            client.close()
        self.stop()
        time.sleep(down_s)
        self.start()
