"""One Redis client per URL for the whole controller.

The reconciler's scaler groups (one per Redis and key namespace: an observer
and a demand listener each) and the decision log all talk to the Redis a
TaskScaler names.  They share one client -- one connection pool -- per URL
instead of opening their own: :meth:`RedisClients.acquire` makes it for the
first user, :meth:`RedisClients.release` closes it when the last one lets
go.  A demand listener's pub/sub takes a connection of its own from that
pool, as any command does.

The client is made by :func:`taskscale.connection.connect` with the
controller's settings: both socket timeouts ``timeout_s``, and redis-py's own
retries left on (every read of the controller is safe to repeat).
"""

from __future__ import annotations

import threading

from taskscale.connection import ConnectionSettings, connect
from taskscale.redis_urls import RedisClient

#: Socket timeouts of the controller's Redis clients (ReconcilerSettings' default).
DEFAULT_TIMEOUT_S = 2.0


class RedisClients:
    """Clients by URL, counted: made on the first :meth:`acquire`, closed on
    the last :meth:`release`.  Thread-safe."""

    def __init__(self, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[RedisClient, int]] = {}

    def acquire(self, url: str) -> RedisClient:
        """The client for ``url`` (made now if nobody holds it: a cluster client
        reads its slot map here, a RedisError if no node answers)."""
        with self._lock:
            client, users = self._clients.get(url, (None, 0))
            if client is None:
                settings = ConnectionSettings(
                    url,
                    connect_timeout_s=self._timeout_s,
                    socket_timeout_s=self._timeout_s,
                    client_retries=True,
                )
                client = connect(settings)
            self._clients[url] = (client, users + 1)
            return client

    def release(self, url: str) -> None:
        """One user of ``url``'s client is done; the last one closes it."""
        with self._lock:
            client, users = self._clients.get(url, (None, 0))
            if client is None:
                return
            if users > 1:
                self._clients[url] = (client, users - 1)
                return
            del self._clients[url]
        client.close()

    def urls(self) -> list[str]:
        """The URLs with an open client (tests)."""
        with self._lock:
            return sorted(self._clients)
