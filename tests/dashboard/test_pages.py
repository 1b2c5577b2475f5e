"""The dashboard's pages: every one renders, values from Redis are escaped
(a ``<script>`` argument is text), no secret reaches a page, and the
security headers are on every response."""

from __future__ import annotations

import contextlib
import subprocess

import pytest
import redis
from dashhelpers import KEYS, dashboard, dashboard_command, get, make_dead_letters, post

from support.waiting import wait_until
from support.workers import processes, start_worker
from taskscale.producer import Producer

pytestmark = pytest.mark.integration
HOSTILE = "<script>alert('pwned')</script>"
PAGES = ["/", "/workers", "/scaling", "/fanouts", "/types/fail", "/dead/fail", "/delayed/fail"]


def test_a_script_task_argument_renders_as_text_on_every_page_that_shows_it(
    redis_url: str, r: redis.Redis
) -> None:
    make_dead_letters(redis_url, r, [HOSTILE])
    Producer(r, keys=KEYS).enqueue("fail", message=HOSTILE, delay=600)
    with dashboard(redis_url) as d:
        _, dead, _ = get(d.url, "/dead/fail")
        _, delayed, _ = get(d.url, "/delayed/fail")
    for html in (dead, delayed):
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(" in html or "\\u003cscript\\u003ealert(" in html
    # in the error, the traceback and the envelope alike
    assert dead.count("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;") >= 2


def test_every_page_renders_with_security_headers_and_without_the_redis_password(
    redis_url: str, r: redis.Redis
) -> None:
    password = "s3cret-redis-pw"
    r.config_set("requirepass", password)
    try:
        authed = redis_url.replace("redis://", f"redis://:{password}@")
        client = redis.Redis.from_url(authed)
        Producer(client, keys=KEYS).enqueue("fail", message="x")
        with dashboard(authed) as d:
            for path in [*PAGES, "/api/overview", "/api/status"]:
                code, body, headers = get(d.url, path)
                assert code == 200, path
                assert password not in str(body), path
                assert "script-src 'self'" in headers["content-security-policy"]
                assert headers["x-frame-options"] == "DENY"
            _, overview_html, _ = get(d.url, "/")
        assert "127.0.0.1" in overview_html
        client.config_set("requirepass", "")
        client.close()
    finally:
        plain = redis.Redis.from_url(redis_url.replace("redis://", f"redis://:{password}@"))
        with contextlib.suppress(redis.AuthenticationError):  # already reset
            plain.config_set("requirepass", "")
        plain.close()


def test_the_type_page_has_a_form_generated_from_the_catalog(
    redis_url: str, r: redis.Redis
) -> None:
    with (
        processes(start_worker(redis_url, types="sleep,noop", imports=["taskscale.examples"])),
        dashboard(redis_url) as d,
    ):
        wait_until(lambda: "taskscale.examples.sleep" in get(d.url, "/types/sleep")[1])
        _, sleep, _ = get(d.url, "/types/sleep")
        _, noop, _ = get(d.url, "/types/noop")
    assert 'type="number" step="any" name="seconds" data-input="float"' in sleep
    assert 'value="1.0"' in sleep
    assert "Holds a thread for" in sleep
    assert 'name="args" data-input="json" data-target="args"' in noop
    assert 'name="kwargs" data-input="json" data-target="kwargs"' in noop


def test_the_dashboard_command_binds_loopback_and_prints_no_password(
    redis_url: str, r: redis.Redis
) -> None:
    password = "cli-secret-pw"
    r.config_set("requirepass", password)
    authed = redis_url.replace("redis://", f"redis://:{password}@")
    try:
        with dashboard_command(
            redis_url, f"--redis-url={authed}", stderr=subprocess.STDOUT
        ) as console:
            assert get(console.url, "/api/status")[0] == 200
            assert post(console.url, "/api/dead/fail/retry", {"all": True})[0] == 403
    finally:
        client = redis.Redis.from_url(authed)
        client.config_set("requirepass", "")
        client.close()
    assert f"http://127.0.0.1:{console.port}/ (read-only (no --token))" in console.output
    assert password not in console.output
