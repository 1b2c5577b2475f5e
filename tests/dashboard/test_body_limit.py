"""The console reads no request body over ``--max-body`` (default 1 MiB):
413 at once for a declared Content-Length over it, 413 as soon as a chunked
body passes it -- never the whole body into memory first (issue 21, case
7) -- and a JSON body within it is held to the limits of every JSON input
(issue 21, case 5: a deep one answered 500)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis
from dashhelpers import KEYS, TOKEN, post

from taskscale.cli import build_parser
from taskscale.dashboard.body_limit import DEFAULT_MAX_BODY_BYTES
from taskscale.dashboard.server import RunningDashboard, serve_in_thread
from taskscale.json_input import MAX_JSON_DEPTH

pytestmark = pytest.mark.integration

LIMIT = 64 * 1024


@pytest.fixture
def console(redis_url: str) -> Iterator[RunningDashboard]:
    running = serve_in_thread(redis_url, namespace="taskscale", token=TOKEN, max_body_bytes=LIMIT)
    try:
        yield running
    finally:
        running.stop()


def raw_request(console: RunningDashboard, head: str, body: bytes) -> tuple[int, bytes]:
    """Send ``head`` and ``body`` on a socket, never finishing the body unless
    ``body`` does; the status and what came back within 10 s."""
    parts = urlsplit(console.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.replace("HOST", parts.netloc).encode() + body)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)  # socket.timeout: no answer (it waits for the body)
            if not chunk:
                break
            reply += chunk
    return int(reply.split(b" ", 2)[1]), reply


def post_head(path: str, framing: str) -> str:
    return (
        f"POST {path} HTTP/1.1\r\nHost: HOST\r\nX-Taskscale-Token: {TOKEN}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    )


def test_a_declared_length_over_the_limit_is_413_before_the_body_is_sent(
    console: RunningDashboard, r: redis.Redis
) -> None:
    head = post_head("/api/enqueue/t", "Content-Length: 300000000")  # 300 MB, never sent
    code, reply = raw_request(console, head, b"")
    assert code == 413
    assert b"over the limit of 65536 bytes" in reply
    assert r.llen(KEYS.queue("t")) == 0


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(
    console: RunningDashboard, r: redis.Redis
) -> None:
    chunk = b'{"args":["' + b"x" * 8000
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // 8000 + 2))
    # the body is never finished (no last chunk): only a limit that counts answers
    code, reply = raw_request(
        console, post_head("/api/enqueue/t", "Transfer-Encoding: chunked"), chunks
    )
    assert code == 413 and b"--max-body" in reply
    assert r.llen(KEYS.queue("t")) == 0


def test_a_body_within_the_limit_is_served(console: RunningDashboard, r: redis.Redis) -> None:
    code, _ = post(console.url, "/api/enqueue/t", {"args": ["x" * (LIMIT // 2)]})
    assert code == 200 and r.llen(KEYS.queue("t")) == 1


@pytest.mark.parametrize("path", ["/api/enqueue/t", "/api/call/t", "/api/dead/t/retry"])
def test_deep_or_unnumbered_json_bodies_are_400_not_500(
    console: RunningDashboard, r: redis.Redis, path: str
) -> None:
    deep = '{"args":' + "[" * 20_000 + "]" * 20_000 + "}"  # json.loads: RecursionError
    head = post_head(path, f"Content-Length: {len(deep)}")
    code, reply = raw_request(console, head, deep.encode())
    assert code == 400, reply
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"] == (
        f"the body is nested more than {MAX_JSON_DEPTH} deep (the limit)"
    )
    nan = '{"args":[NaN]}'
    code, reply = raw_request(console, post_head(path, f"Content-Length: {len(nan)}"), nan.encode())
    assert code == 400 and b"NaN" in reply
    assert r.llen(KEYS.queue("t")) == 0


def test_the_flag_and_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_parser().parse_args(["dashboard"]).max_body == DEFAULT_MAX_BODY_BYTES == 1 << 20
    monkeypatch.setenv("TASKSCALE_MAX_BODY", "2048")
    assert build_parser().parse_args(["dashboard"]).max_body == 2048
    assert build_parser().parse_args(["dashboard", "--max-body", "10"]).max_body == 10
