"""Redis URLs -> redis-py clients: the one place a client is built.

Callers go through :func:`taskscale.connection.connect` (which passes the
connection options to :func:`build_client`); :func:`node_client` copies an
existing client's settings into a client with connections of its own.

Every command, environment variable, TaskScaler and chart value that names a
Redis takes one URL, in one of these forms:

* ``redis://[user:pass@]host:port/db``, ``rediss://...`` (TLS) and
  ``unix:///path/to/sock?db=N`` -- parsed by redis-py itself;
* ``redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]`` --
  a :class:`redis.sentinel.Sentinel` asks the listed sentinels for the
  current master of ``service``; the credentials are the master's
  (``sentinel_username`` / ``sentinel_password`` query parameters, if the
  sentinels need their own);
* ``redis+cluster://[user:pass@]host:port[,host:port...]`` -- a
  :class:`redis.cluster.RedisCluster` that discovers the cluster from any of
  the listed nodes.

``rediss+sentinel://`` and ``rediss+cluster://`` speak TLS to every node.
TLS options are query parameters on any TLS scheme: ``ssl_ca_certs``,
``ssl_certfile``, ``ssl_keyfile``, ``ssl_cert_reqs`` (``required`` /
``optional`` / ``none``) and ``ssl_check_hostname``.  Discovery and failover
are redis-py's own; nothing here talks to a server.  Malformed URLs raise
:class:`ValueError` with one line that names what is wrong, with the
password masked.
"""

from __future__ import annotations

from typing import Any, TypeAlias
from urllib.parse import unquote, urlsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import URL_QUERY_ARGUMENT_PARSERS, parse_url
from redis.sentinel import Sentinel

from taskscale.logs import redact

#: A client of any topology: one server (plain or through Sentinel) or a cluster.
RedisClient: TypeAlias = redis.Redis | RedisCluster

SCHEMES = (
    "redis",
    "rediss",
    "unix",
    "redis+sentinel",
    "rediss+sentinel",
    "redis+cluster",
    "rediss+cluster",
)
_TLS_PARAMS = frozenset(
    {"ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_password"}
    | {k for k in URL_QUERY_ARGUMENT_PARSERS if k.startswith("ssl_")}
)
_SENTINEL_PARAMS = frozenset({"sentinel_username", "sentinel_password"})
_PARAMS = frozenset(URL_QUERY_ARGUMENT_PARSERS) | _TLS_PARAMS | {"client_name"} | _SENTINEL_PARAMS


def connection_kwargs(client: RedisClient) -> dict[str, Any]:
    """The keyword arguments every connection of ``client`` is made with."""
    if isinstance(client, RedisCluster):
        return dict(client.nodes_manager.connection_kwargs)
    return dict(client.connection_pool.connection_kwargs)


def node_client(
    client: RedisClient, key: str = "", *, single_connection: bool = True
) -> redis.Redis:
    """A new client, with connections of its own, to the server that holds
    ``key`` (a single server ignores ``key``): one connection, or a pool.

    A blocking read and the ``CLIENT UNBLOCK`` that cuts it short must reach
    the same server over connections of their own; a forked RQ work horse
    must not share its parent's pool.  On one server (plain or through
    Sentinel, whose connections look the master up as they connect) that is
    a copy of the client's connection settings; on a cluster it is the
    master of ``key``'s slot *now* -- after a failover, make a new one.
    """
    if isinstance(client, RedisCluster):
        node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
        pool = node.redis_connection.connection_pool
    else:
        pool = client.connection_pool
    return redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, **pool.connection_kwargs
        ),
        single_connection_client=single_connection,
    )


def build_client(url: str, **options: Any) -> RedisClient:
    """A client for ``url``; ``options`` (timeouts, retry, ...) apply to every
    connection it makes.  Nothing is sent until first use, except that a
    cluster client reads the slot map as it is made (a RedisError if no
    listed node answers)."""
    client = _checked(url, options, dry=False)
    assert client is not None
    return client


def check_url(url: str) -> None:
    """Raise :class:`ValueError` (one line) if ``url`` is malformed; no I/O."""
    _checked(url, {}, dry=True)


def _userinfo(url: str) -> tuple[str, str, str, str] | None:
    """``(scheme://, user, password, rest)`` when ``url`` has ``user:password@``
    before its last ``@``, read loosely (no ``://`` needed, any character in the
    password), so that even a malformed URL's password can be hidden."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, hosts = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return None
    user, _, password = userinfo.partition(":")
    return scheme + sep, user, password, hosts


def mask_url(url: str) -> str:
    """``url`` with its password shown as ``***``, also when it is too malformed
    for :func:`~taskscale.logs.redact` (no ``://``, a ``/`` in the password):
    everything between the user's ``:`` and the last ``@`` is hidden (an ``@``
    further on, e.g. in a query value, hides more than needed, never less)."""
    parts = _userinfo(url)
    if parts is not None:
        prefix, user, _, hosts = parts
        url = f"{prefix}{user}:***@{hosts}"
    return redact(url)


def _checked(url: str, options: dict[str, Any], *, dry: bool) -> RedisClient | None:
    try:
        return _build(url, options, dry=dry)
    except ValueError as exc:
        raise ValueError(f"invalid Redis URL {mask_url(url)!r}: {exc}") from None


def _build(url: str, options: dict[str, Any], *, dry: bool) -> RedisClient | None:
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise ValueError(f"the scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    loose = _userinfo(url)
    if loose is not None and "=" not in loose[2] and any(c in loose[2] for c in "/?#"):
        # urlsplit would end the host part there and quote pieces of the password
        raise ValueError("percent-encode '/', '?' and '#' in the password (%2F, %3F, %23)")
    tls = scheme.startswith("rediss")
    kwargs = _query(url, tls=tls)
    if scheme in ("redis", "rediss", "unix"):
        if _SENTINEL_PARAMS & kwargs.keys():
            raise ValueError("sentinel_* parameters need a redis+sentinel URL")
        database = urlsplit(url).path.strip("/")  # redis-py would quietly use 0
        if scheme != "unix" and database and not database.isdigit():
            raise ValueError(f"database {database!r} is not a number")
        try:
            port = urlsplit(url).port
        except ValueError as exc:  # its own text may quote a piece of a malformed password
            raise ValueError(
                "Port out of range 1-65535" if "range" in str(exc) else "the port is not a number"
            ) from None
        if port == 0:
            raise ValueError("the port must be 1-65535")
        if dry:
            return None
        return redis.Redis.from_url(url, **options)  # redis-py's own parser
    parts = urlsplit(url)
    user, password, hosts = _credentials(parts.netloc)
    nodes = _hosts(hosts)
    if user is not None:
        kwargs["username"] = user
    if password is not None:
        kwargs["password"] = password
    if tls:
        kwargs["ssl"] = True
    path = [unquote(p) for p in parts.path.split("/") if p]
    if scheme.endswith("+cluster"):
        if path and path != ["0"]:
            raise ValueError("a cluster has only database 0 (no path after the hosts)")
        kwargs.pop("db", None)
        if dry:
            return None
        return RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in nodes],  # type: ignore[no-untyped-call]
            **{**options, **kwargs},  # the URL's parameters win, as in redis-py
        )
    return _sentinel_master(nodes, path, kwargs, options)


def _sentinel_master(
    nodes: list[tuple[str, int]], path: list[str], kwargs: dict[str, Any], options: dict[str, Any]
) -> redis.Redis:
    if not path or len(path) > 2:
        raise ValueError("name the service after the hosts: /service or /service/db")
    service = path[0]
    db = kwargs.pop("db", 0)
    if len(path) == 2:
        try:
            db = int(path[1])
        except ValueError:
            raise ValueError(f"the database {path[1]!r} is not a number") from None
    sentinel_kwargs = {k: v for k, v in kwargs.items() if k in _TLS_PARAMS or k == "ssl"}
    for name in ("username", "password"):
        value = kwargs.pop(f"sentinel_{name}", None)
        if value is not None:
            sentinel_kwargs[name] = value
    for name in ("socket_timeout", "socket_connect_timeout"):
        if name in options or name in kwargs:
            sentinel_kwargs[name] = kwargs.get(name, options.get(name))
    sentinel = Sentinel(nodes, sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        service, db=db, **{**options, **kwargs}
    )
    return client


def _query(url: str, *, tls: bool) -> dict[str, Any]:
    """The query parameters as redis-py parses them; unknown names are errors."""
    query = urlsplit(url).query
    names = [p.split("=", 1)[0] for p in query.split("&") if p]
    unknown = sorted(set(names) - _PARAMS)
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}")
    if not tls and any(n in _TLS_PARAMS for n in names):
        raise ValueError("TLS parameters (ssl_*) need a rediss scheme")
    if not query:
        return {}
    kwargs: dict[str, Any] = parse_url(f"redis://localhost/?{query}")  # type: ignore[no-untyped-call]
    kwargs.pop("host", None)
    return kwargs


def _credentials(netloc: str) -> tuple[str | None, str | None, str]:
    if "@" not in netloc:
        return None, None, netloc
    userinfo, _, hosts = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    return (unquote(user) or None), (unquote(password) if colon else None), hosts


def _hosts(text: str) -> list[tuple[str, int]]:
    if not text:
        raise ValueError("list at least one host:port")
    nodes = []
    for item in text.split(","):
        host, colon, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not colon or not host:
            raise ValueError(f"{item!r} is not host:port")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} has no valid port (1-65535)")
        nodes.append((host, int(port)))
    return nodes
