"""Redis URLs of every scheme: what client each becomes, and one-line errors.

Nothing here needs a server: a plain or Sentinel client sends nothing until
first use, and malformed URLs are refused before any connection.  (The
clients talking to real clusters, sentinels and TLS servers are in
tests/topology/, on the servers tests/support/topologies.py starts.)
"""

from __future__ import annotations

import pytest
import redis
from redis.sentinel import SentinelConnectionPool

from taskscale.connection import connect
from taskscale.logs import redact
from taskscale.redis_urls import check_url


def test_plain_tls_and_unix_urls_are_parsed_by_redis_py() -> None:
    plain = connect("redis://:pw@127.0.0.1:6380/3")
    assert isinstance(plain, redis.Redis)
    kwargs = plain.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["password"]) == (
        "127.0.0.1",
        6380,
        3,
        "pw",
    )
    tls = connect("rediss://127.0.0.1:6380/0?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required")
    assert isinstance(tls, redis.Redis)
    assert tls.connection_pool.connection_class is redis.SSLConnection
    assert tls.connection_pool.connection_kwargs["ssl_ca_certs"] == "/etc/ca.pem"
    sock = connect("unix:///run/redis.sock?db=2")
    assert isinstance(sock, redis.Redis)
    assert sock.connection_pool.connection_kwargs["path"] == "/run/redis.sock"


def test_sentinel_url_names_the_sentinels_the_service_the_db_and_the_credentials() -> None:
    client = connect(
        "redis+sentinel://app:s3cret@127.0.0.1:26379,[::1]:26380/orders/4"
        "?sentinel_password=sp&socket_timeout=2"
    )
    assert isinstance(client, redis.Redis)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "orders"
    assert pool.connection_kwargs["db"] == 4
    assert pool.connection_kwargs["username"] == "app"
    assert pool.connection_kwargs["password"] == "s3cret"
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [26379, 26380]
    assert [s.connection_pool.connection_kwargs["host"] for s in sentinels] == ["127.0.0.1", "::1"]
    assert sentinels[0].connection_pool.connection_kwargs["password"] == "sp"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("foo://x", "the scheme must be one of redis://"),
        ("127.0.0.1:6379", "the scheme must be one of"),
        ("redis://127.0.0.1:99999/0", "Port out of range"),
        ("redis://127.0.0.1:6379/0?bogus=1", "unknown parameter(s) bogus"),
        ("redis://127.0.0.1:6379/0?ssl_ca_certs=/ca", "TLS parameters (ssl_*) need a rediss"),
        ("redis://h:1/0?sentinel_username=x", "sentinel_* parameters need a redis+sentinel"),
        ("redis+sentinel://127.0.0.1:26379", "name the service after the hosts"),
        ("redis+sentinel://127.0.0.1:26379/svc/x", "the database 'x' is not a number"),
        ("redis+sentinel://127.0.0.1/svc", "'127.0.0.1' is not host:port"),
        ("redis+sentinel:///svc", "list at least one host:port"),
        ("redis+cluster://127.0.0.1:7000,127.0.0.1:x", "'127.0.0.1:x' has no valid port"),
        ("redis+cluster://127.0.0.1:7000/2", "a cluster has only database 0"),
        ("redis+cluster://127.0.0.1:7000?socket_timeout=abc", "Invalid value for 'socket_timeout'"),
    ],
)
def test_malformed_urls_are_one_line_errors(url: str, problem: str) -> None:
    with pytest.raises(ValueError) as info:
        check_url(url)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"invalid Redis URL {url!r}: ")
    assert problem in message


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://app:hunter2@127.0.0.1:26379/svc/x",
        "redis+cluster://:hunter2@127.0.0.1:7000/5",
        "redis://:hunter2@127.0.0.1:6379/0?bogus=1",
        "redis+sentinel://127.0.0.1:26379/svc/x?sentinel_password=hunter2",
    ],
)
def test_errors_never_show_the_password(url: str) -> None:
    with pytest.raises(ValueError) as info:
        check_url(url)
    assert "hunter2" not in str(info.value)
    assert "***" in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis:/app:s3cr3t@127.0.0.1:6379/0",  # no "://": redact() finds no URL here
        "redis//app:s3cr3t@127.0.0.1:6379/0",
        "redis://app:s3cr/3t@127.0.0.1:6379/0",  # an unencoded "/": the "port" is "s3cr"
        "redis://app:s3cr?3t@127.0.0.1:6379/0",
        "redis+sentinel://app:s3cr/3t@127.0.0.1:26379/svc",
    ],
)
def test_a_malformed_url_shows_no_piece_of_its_password(url: str) -> None:
    with pytest.raises(ValueError) as info:
        check_url(url)
    message = str(info.value)
    assert "s3cr" not in message and "3t@" not in message, message
    assert "***@127.0.0.1" in message
    if "://" in url:
        assert "percent-encode" in message


def test_a_query_value_with_an_at_sign_is_not_taken_for_a_password() -> None:
    check_url("redis://127.0.0.1:6379/0?client_name=a:b/c@d")


def test_log_masking_covers_every_scheme_and_query_passwords() -> None:
    text = (
        "a redis+sentinel://u:p1@h:1,h:2/s/0?sentinel_password=p2 "
        "b rediss+cluster://:p3@h:7000?ssl_password=p4&ssl_ca_certs=/ca.pem"
    )
    masked = redact(text)
    for secret in ("p1", "p2", "p3", "p4"):
        assert f"{secret}@" not in masked and f"={secret}" not in masked
    assert "ssl_ca_certs=/ca.pem" in masked and "redis+sentinel://u:***@h:1,h:2/s/0" in masked
