"""Reads behind the token (issue 24, item 6), against the real app over
HTTP: with ``--auth-reads`` every page and read endpoint needs the token
(header, or the login page's cookie) or a trusted proxy's user header;
``/healthz``, the static files and the login page stay open; the cookie
never allows a state change."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode, urlsplit

import pytest
import redis
from dashhelpers import KEYS, TOKEN

from support.workers import taskscale_process
from taskscale.dashboard.server import RunningDashboard, read_auth_of, serve_in_thread
from taskscale.producer import Producer

pytestmark = pytest.mark.integration
READS = ["/", "/workers", "/scaling", "/fanouts", "/types/t", "/dead/t", "/delayed/t"]
API = ["/api/overview", "/api/status", "/api/catalog", "/api/workers", "/api/delayed/t"]
Reply = tuple[int, dict[str, str], str]


@contextmanager
def console(url: str, **options: object) -> Iterator[RunningDashboard]:
    running = serve_in_thread(url, namespace="taskscale", token=TOKEN, **options)  # type: ignore[arg-type]
    try:
        yield running
    finally:
        running.stop()


def call(base: str, path: str, *, method: str = "GET", body: str = "", **headers: str) -> Reply:
    """One request, redirects not followed: (status, headers lowercased, body)."""
    where = urlsplit(base)
    conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=60)
    try:
        sent = {k.replace("_", "-"): v for k, v in headers.items()}
        if body:
            sent.setdefault("content-type", "application/x-www-form-urlencoded")
        conn.request(method, path, body=body.encode() or None, headers=sent)
        reply = conn.getresponse()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read().decode()
    finally:
        conn.close()


def test_without_the_token_nothing_but_health_static_and_login_is_read(
    redis_url: str, r: redis.Redis
) -> None:
    Producer(r, keys=KEYS).enqueue("t", "personal data", delay=600)
    with console(redis_url, auth_reads=True) as d:
        for path in READS:
            code, headers, body = call(d.url, path + "?start=0")
            assert code == 303, path
            assert headers["location"] == "/login?next=" + path.replace("/", "%2F") + "%3Fstart%3D0"
            assert "personal data" not in body
        for path in [*API, "/api/tasks/x"]:
            code, headers, body = call(d.url, path)
            assert code == 401, path
            assert "reads need the operator token" in body
            assert "script-src 'self'" in headers["content-security-policy"]
        assert call(d.url, "/api/overview", x_taskscale_token="wrong")[0] == 401
        assert call(d.url, "/healthz")[:3:2] == (200, "ok")
        assert call(d.url, "/static/dashboard.css")[0] == 200
        assert call(d.url, "/login")[0] == 200
        for path in [*READS, *API]:  # the token in the header reads everything
            assert call(d.url, path, x_taskscale_token=TOKEN)[0] == 200, path
        _, _, delayed = call(d.url, "/delayed/t", x_taskscale_token=TOKEN)
        assert "personal data" in delayed


def test_the_login_page_sets_a_read_cookie_that_cannot_write(
    redis_url: str, r: redis.Redis
) -> None:
    task_id = Producer(r, keys=KEYS).enqueue("t", 1, delay=600)
    with console(redis_url, auth_reads=True) as d:
        form = urlencode({"token": "wrong", "next": "/workers"})
        code, headers, body = call(d.url, "/login", method="POST", body=form)
        assert code == 401 and "set-cookie" not in headers and "wrong token" in body
        form = urlencode({"token": TOKEN, "next": "/workers"})
        code, headers, _ = call(d.url, "/login", method="POST", body=form)
        assert code == 303 and headers["location"] == "/workers"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert TOKEN not in cookie  # an HMAC of it, not the token
        session = cookie.split(";", 1)[0]
        for path in [*READS, *API]:
            assert call(d.url, path, cookie=session)[0] == 200, path
        forged = session.split("=", 1)[0] + "=" + "0" * 64
        assert call(d.url, "/api/overview", cookie=forged)[0] == 401
        assert call(d.url, "/api/overview", cookie="a=b; ;; =")[0] == 401  # malformed
        # the cookie reads, it never writes: the token header is still needed
        code, _, _ = call(d.url, f"/api/delayed/t/{task_id}/delete", method="POST", cookie=session)
        assert code == 403
        assert r.zcard(KEYS.delayed("t")) == 1
        # next= only ever leads back into the console
        for evil in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
            form = urlencode({"token": TOKEN, "next": evil})
            assert call(d.url, "/login", method="POST", body=form)[1]["location"] == "/"


def test_a_trusted_proxy_s_user_header_reads_only_from_the_proxy(redis_url: str) -> None:
    header = {"x_forwarded_user": "alice@example.com"}
    for proxies, allowed in ((["127.0.0.1"], True), (["10.0.0.0/8"], False)):
        options = {"trusted_user_header": "X-Forwarded-User", "trusted_proxies": proxies}
        with console(redis_url, auth_reads=True, **options) as d:
            assert (call(d.url, "/api/overview", **header)[0] == 200) is allowed
            assert (call(d.url, "/", **header)[0] == 200) is allowed
            assert call(d.url, "/api/overview")[0] == 401  # no header: no reader
            assert call(d.url, "/api/overview", x_forwarded_user=" ")[0] == 401


def test_reads_stay_open_without_the_option(redis_url: str) -> None:
    with console(redis_url) as d:
        assert call(d.url, "/api/overview")[0] == 200
        assert call(d.url, "/")[0] == 200
        assert call(d.url, "/login")[0] == 404


def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="needs the operator token"):
        read_auth_of(True, None, None, [])
    with pytest.raises(ValueError, match="needs --trusted-proxy"):
        read_auth_of(True, "t", "X-Forwarded-User", [])
    with pytest.raises(ValueError, match="need --auth-reads"):
        read_auth_of(False, "t", "X-Forwarded-User", ["10.0.0.1"])
    with pytest.raises(ValueError, match="invalid proxy address"):
        read_auth_of(True, "t", "X-Forwarded-User", ["not-an-address"])
    found = read_auth_of(True, None, "X-User", ["10.0.0.0/8"])
    assert found is not None and found.user_header == "X-User"
    assert [str(n) for n in found.proxies] == ["10.0.0.0/8"]
    assert read_auth_of(False, "t", None, []) is None


def test_the_command_refuses_auth_reads_without_a_token(redis_url: str) -> None:
    process = taskscale_process(
        redis_url, "dashboard", "--port=0", env={"TASKSCALE_AUTH_READS": "1"}, stderr=-1, text=True
    )
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "--auth-reads needs the operator token" in errors
