"""An exception as the one line a user reads.

A command that fails prints one line, not a traceback; a TaskScaler's
condition, Event and status message are one line too.  :func:`one_line` is
the one way to make that line from any exception (four modules had their
own copy, one of them masking passwords): the first line of its text, or its
class name when it has none, with every URL password masked -- an error may
quote the Redis URL it was given.  :func:`describe_error` words a Redis error
on top of it: what went wrong (unreachable, credentials refused, a key of the
wrong type) and where (host, Sentinel service, cluster).
"""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from taskscale.logs import redact
from taskscale.redis_urls import RedisClient, mask_url
from taskscale.retrying import TRANSIENT_ERRORS

__all__ = ["describe_error", "one_line"]


def one_line(exc: BaseException, *, typed: bool = False, url: str | None = None) -> str:
    """The first line of ``str(exc)``, or the class name when the text is empty;
    ``typed`` puts the class name first (``"ValueError: bad port"``).

    Every URL password in it is masked (:func:`taskscale.logs.redact`); ``url``,
    a URL the text may quote, is masked in full even when it is too malformed
    for that (:func:`taskscale.redis_urls.mask_url`)."""
    stripped = str(exc).strip()
    first = stripped.splitlines()[0] if stripped else ""
    name = type(exc).__name__
    text = (f"{name}: {first}" if typed else first) if first else name
    if url:
        text = text.replace(url, mask_url(url))
    return redact(text)


def describe_error(exc: BaseException, *, client: RedisClient | None = None) -> str:
    """One line that tells a user what went wrong with Redis and where."""
    where = f" at {_location(client)}" if client is not None else ""
    text = one_line(exc)
    if isinstance(exc, redis.AuthenticationError):
        return f"Redis{where} refused the credentials: {text}"
    if isinstance(exc, TRANSIENT_ERRORS):
        return f"cannot reach Redis{where}: {text}"
    # BADKEY: a script's check before it writes, naming the key (taskscale.key_types)
    if isinstance(exc, redis.ResponseError) and text.startswith(("WRONGTYPE", "BADKEY")):
        return (
            f"a taskscale key in Redis{where} holds the wrong type of value "
            f"(another application uses this namespace? try --namespace): {text}"
        )
    if isinstance(exc, redis.ResponseError):
        return f"Redis{where} rejected a command: {text}"
    return f"Redis error{where}: {text}"


def _location(client: RedisClient) -> str:
    if isinstance(client, RedisCluster):
        nodes = client.get_primaries() or client.get_nodes()  # type: ignore[no-untyped-call]
        return "cluster " + ",".join(node.name for node in nodes[:3])
    pool = client.connection_pool
    service = getattr(pool, "service_name", None)
    if service is not None:
        return f"sentinel service {service}"
    kwargs = pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
