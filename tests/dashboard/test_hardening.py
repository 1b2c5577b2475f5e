"""The console's defences beyond the token: a console on a loopback address
answers only requests naming it in the Host header (a DNS-rebinding page
names its own host), ``--allowed-host`` for the names a port-forward brings,
and the operator token taken from the environment."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from dashhelpers import TOKEN, dashboard_command, make_dead_letters, post

from support.workers import run_taskscale
from taskscale.dashboard.hosts import ANY, LISTENING, Allowed, allowed_for, allowed_host
from taskscale.dashboard.server import TOKEN_ENV, serve_in_thread


def status_with_host(port: int, host: str, path: str = "/api/overview") -> int:
    """GET ``path`` from 127.0.0.1:``port`` with this Host header: the status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        reply = conn.getresponse()
        reply.read()
        return reply.status
    finally:
        conn.close()


def test_loopback_host_names_are_allowed_on_the_listening_port_only() -> None:
    assert allowed_for("0.0.0.0") is None and allowed_for("10.1.2.3") is None
    assert allowed_for("0.0.0.0", [allowed_host("console.example")]) == (
        Allowed("console.example", ANY),
    )
    names = {a.name for a in allowed_for("127.0.0.1") or ()}
    assert names == {"localhost", "127.0.0.1", "[::1]"}
    assert {a.name for a in allowed_for("::1") or ()} == names
    assert Allowed("127.0.0.2", LISTENING) in (allowed_for("127.0.0.2") or ())
    assert allowed_host("LocalHost:9000") == Allowed("localhost", 9000)
    assert allowed_host("[::1]:9000") == Allowed("[::1]", 9000)
    for bad in ("", "a b", "host:0", "host:70000", "host:x", "http://host"):
        with pytest.raises(ValueError, match="invalid host"):
            allowed_host(bad)


@pytest.mark.integration
def test_a_loopback_console_refuses_a_request_for_another_host(redis_url: str) -> None:
    with _console(redis_url) as port:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            assert status_with_host(port, host) == 200, host
        for host in (
            f"evil.example:{port}",  # a DNS-rebinding page names its own host
            "evil.example",
            f"localhost:{port + 1}",  # another port: another origin
            "localhost",
            "",
        ):
            assert status_with_host(port, host) == 400, host
        assert status_with_host(port, f"evil.example:{port}", "/") == 400  # pages too
        # a kubelet probe names the pod IP: the health check answers any Host
        assert status_with_host(port, "10.0.0.7:8470", "/healthz") == 200
        assert status_with_host(port, "10.0.0.7:8470", "/healthz/") != 200
    with _console(redis_url, allowed=["localhost:9000", "console.example"]) as port:
        assert status_with_host(port, "localhost:9000") == 200  # ssh -L 9000:localhost:PORT
        assert status_with_host(port, "console.example:8443") == 200  # any port when none given
        assert status_with_host(port, f"localhost:{port}") == 200
        assert status_with_host(port, "localhost:9001") == 400


@contextmanager
def _console(url: str, *, allowed: list[str] | None = None) -> Iterator[int]:
    running = serve_in_thread(url, namespace="taskscale", allowed_hosts=allowed or ())
    try:
        yield int(running.url.rsplit(":", 1)[1].strip("/"))
    finally:
        running.stop()


@pytest.mark.integration
def test_the_command_takes_the_token_from_the_environment(redis_url: str, r: redis.Redis) -> None:
    make_dead_letters(redis_url, r, ["one"])
    with dashboard_command(redis_url, env={TOKEN_ENV: TOKEN}) as console:
        url = console.url
        assert post(url, "/api/auth", token="wrong")[0] == 403
        assert post(url, "/api/dead/fail/retry", {"all": True}, token=None)[0] == 403
        assert r.llen("{taskscale}:dead:fail") == 1
        assert post(url, "/api/auth", token=TOKEN) == (200, {"ok": True})
        assert post(url, "/api/dead/fail/retry", {"all": True}) == (200, {"done": 1})
    output, errors = console.output, console.errors
    assert "(state changes need the token)" in output
    assert TOKEN not in output + errors and "--token on the command line" not in errors


@pytest.mark.integration
def test_the_command_warns_of_a_token_on_its_command_line_and_refuses_a_bad_host(
    redis_url: str,
) -> None:
    with dashboard_command(
        redis_url, f"--token={TOKEN}", "--allowed-host=localhost:9000"
    ) as console:
        assert status_with_host(console.port, "localhost:9000") == 200
        assert status_with_host(console.port, "evil.example:9000") == 400
    assert f"prefer the environment variable {TOKEN_ENV}" in console.errors
    bad = run_taskscale(redis_url, "dashboard", "--allowed-host=http://x")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "taskscale dashboard: invalid host 'http://x': give name or name:port (IPv6 as [addr]:port)"
    ]
