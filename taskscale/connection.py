"""Redis clients: the one constructor, where the URL comes from, clear errors.

Every client taskscale makes from a URL is made by :func:`connect` (the
runtime, the command line, the controller, the dashboard, the demo); the URL
comes from the caller or :func:`redis_url_from_env`, and
:func:`taskscale.redis_urls.build_client` turns it into a client of the
right topology.  By default there are no silent retries inside redis-py: a
long-running caller retries through :func:`taskscale.retrying.retrying`,
which waits with exponential backoff and jitter on connection and timeout
errors until the server is back.
Command-line tools, on the other hand, must fail fast with one readable line
(a wrong URL, Redis down), not a traceback: :func:`check` pings once and
raises :class:`RedisUnavailable` with :func:`taskscale.errors.describe_error`'s
line.  It also reads the server's version: the scripts need Redis 7.0
(``LMPOP``, ``#!lua flags=``), and an older server would fail later with a
script error nobody can read, so :func:`check` raises
:class:`RedisTooOld` ("Redis 6.2.14 is too old: taskscale needs 7.0 or
later") instead.  Every process that starts from the command line (worker,
scheduler, dashboard, demo, the one-shot commands) goes through it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, overload

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from taskscale.errors import describe_error
from taskscale.redis_urls import RedisClient, build_client

REDIS_URL_ENV = "TASKSCALE_REDIS_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@overload
def redis_url_from_env(url: str | None = None, *, default: str = DEFAULT_REDIS_URL) -> str: ...
@overload
def redis_url_from_env(url: str | None = None, *, default: None) -> str | None: ...
def redis_url_from_env(
    url: str | None = None, *, default: str | None = DEFAULT_REDIS_URL
) -> str | None:
    """``url`` if given, else ``TASKSCALE_REDIS_URL``, else ``default`` (an
    empty variable counts as unset).

    The one place the variable is read: the library's functions (a ``None``
    Redis), ``--redis-url``'s default on every subcommand but ``demo``, the
    integrations.  ``default=None`` tells a caller that has a Redis of its own
    to fall back on (RQ's worker connection) that neither was given."""
    return url or os.environ.get(REDIS_URL_ENV) or default


class RedisUnavailable(RuntimeError):
    """Redis could not be reached (the message is one line, for users)."""


class RedisTooOld(RuntimeError):
    """The server is older than :data:`MIN_REDIS_VERSION` (one line, for users)."""


#: The oldest Redis the scripts run on: LMPOP (claim.lua) and ``#!lua flags=``.
MIN_REDIS_VERSION = (7, 0)


@dataclass(frozen=True)
class ConnectionSettings:
    """How a client connects to Redis (the defaults are the runtime's)."""

    url: str = DEFAULT_REDIS_URL
    connect_timeout_s: float = 5.0
    #: Longest a reply may take; blocking reads use shorter timeouts than this.
    socket_timeout_s: float = 30.0
    #: Let redis-py retry a failed command itself (its default policy).  Off for
    #: the runtime: a claim retried behind our back could strand tasks, so
    #: callers retry through taskscale.retrying.  The controller, whose reads
    #: are safe to repeat, and the demo leave it on.
    client_retries: bool = False

    @classmethod
    def from_env(cls, url: str | None = None) -> ConnectionSettings:
        return cls(url=redis_url_from_env(url))


def connect(settings: ConnectionSettings | str | None = None) -> RedisClient:
    """A client for ``settings`` (or a URL of any scheme taskscale.redis_urls
    accepts).  Nothing is sent until first use, except that a cluster client
    reads the slot map when it is made (a RedisError if no node answers).

    Raises :class:`ValueError` with a one-line message for a malformed URL.
    """
    if not isinstance(settings, ConnectionSettings):
        settings = ConnectionSettings.from_env(settings)
    options: dict[str, Any] = {
        "socket_connect_timeout": settings.connect_timeout_s,
        "socket_timeout": settings.socket_timeout_s,
        "socket_keepalive": True,
        "health_check_interval": 30,
    }
    if not settings.client_retries:
        # No silent retries inside redis-py: a retried claim whose first
        # reply was lost would strand tasks.  Callers retry via retrying.retrying().
        options["retry"] = Retry(NoBackoff(), 0)
    return build_client(settings.url, **options)


#: What the runtime's public functions accept as "which Redis": a client, a
#: URL, or None for ``TASKSCALE_REDIS_URL`` (default redis://127.0.0.1:6379/0).
RedisLike = redis.Redis | RedisCluster | str | None


def client_for(target: RedisLike) -> RedisClient:
    """``target`` itself if it is a client, else a client for the URL / env."""
    if isinstance(target, redis.Redis | RedisCluster):
        return target
    if target is not None and not isinstance(target, str):
        raise TypeError(f"expected a Redis client, a Redis URL or None, not {target!r}")
    return connect(target)


def check(client: RedisClient) -> None:
    """PING once and read the server's version: :class:`RedisUnavailable` with
    one readable line if Redis cannot be reached, :class:`RedisTooOld` if it
    is older than :data:`MIN_REDIS_VERSION`."""
    try:
        client.ping()
        info = client.info("server")
    except redis.RedisError as exc:
        raise RedisUnavailable(describe_error(exc, client=client)) from None
    check_version(info)


def check_version(info: Mapping[str, Any]) -> None:
    """Raise :class:`RedisTooOld` if the ``INFO server`` reply ``info`` names a
    version older than :data:`MIN_REDIS_VERSION`.

    A cluster client's reply is one such mapping per node (the oldest node
    counts).  A reply with no version, or one we cannot read, passes:
    the check is there to explain a failure, not to refuse what may work."""
    versions = _versions(info)
    if not versions:
        return
    oldest = min(versions, key=lambda v: v[0])
    if oldest[0] < MIN_REDIS_VERSION:
        need = ".".join(map(str, MIN_REDIS_VERSION))
        raise RedisTooOld(f"Redis {oldest[1]} is too old: taskscale needs {need} or later")


def _versions(info: Mapping[str, Any]) -> list[tuple[tuple[int, ...], str]]:
    text = info.get("redis_version")
    if text is None:  # a cluster client: {node: {...}}
        found = []
        for node in info.values():
            if isinstance(node, Mapping):
                found += _versions(node)
        return found
    text = str(text)
    try:
        parts = tuple(int(p) for p in text.split(".")[:2])
    except ValueError:  # not a version we can read: let it be (see check_version)
        return []
    return [(parts, text)]
