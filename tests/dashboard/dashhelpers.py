"""Helpers of the dashboard tests: a dashboard served from a thread, HTTP
requests with the stdlib, and dead letters made by a real worker."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis

from support.redis_server import free_port
from support.waiting import wait_until
from support.workers import processes, start_worker, taskscale_process
from taskscale.dashboard.server import RunningDashboard, serve_in_thread
from taskscale.keys import Keys
from taskscale.producer import Producer

KEYS = Keys("taskscale")
TOKEN = "test-operator-token"
EXAMPLES = ["taskscale.examples"]


@contextmanager
def dashboard(url: str, *, token: str | None = TOKEN) -> Iterator[RunningDashboard]:
    running = serve_in_thread(url, namespace="taskscale", token=token)
    try:
        yield running
    finally:
        running.stop()


@dataclass
class DashboardCommand:
    """A ``taskscale dashboard`` process; its output once it has stopped."""

    process: subprocess.Popen[str]
    port: int
    url: str
    output: str = ""
    errors: str = ""


@contextmanager
def dashboard_command(
    redis_url: str,
    *args: str,
    env: dict[str, str] | None = None,
    stderr: int = subprocess.PIPE,
) -> Iterator[DashboardCommand]:
    """``taskscale dashboard --port=P ARGS`` on a free port, yielded once it
    answers ``/healthz``; terminated on exit, its stdout/stderr then kept."""
    port = free_port()
    process = taskscale_process(
        redis_url,
        "dashboard",
        f"--port={port}",
        *args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    running = DashboardCommand(process, port, f"http://127.0.0.1:{port}/")
    try:
        wait_until(lambda: answers(running.url))
        yield running
    finally:
        process.terminate()
        running.output, running.errors = process.communicate(timeout=30)


def answers(url: str) -> bool:
    """Whether the console at ``url`` answers its health check."""
    try:
        return get(url, "/healthz")[0] == 200
    except OSError:
        return False


def get(base: str, path: str) -> tuple[int, Any, dict[str, str]]:
    """GET ``path``: (status, JSON or text, headers)."""
    try:
        with urllib.request.urlopen(base + path.lstrip("/"), timeout=60) as reply:
            return reply.status, _decode(reply.read(), reply.headers), dict(reply.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _decode(exc.read(), exc.headers), dict(exc.headers)


def post(base: str, path: str, doc: Any = None, *, token: str | None = TOKEN) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["X-Taskscale-Token"] = token
    request = urllib.request.Request(
        base + path.lstrip("/"),
        data=json.dumps(doc if doc is not None else {}).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, _decode(reply.read(), reply.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _decode(exc.read(), exc.headers)


def _decode(raw: bytes, headers: Any) -> Any:
    text = raw.decode()
    if "json" in (headers.get("Content-Type") or ""):
        return json.loads(text)
    return text


def make_dead_letters(url: str, r: redis.Redis, messages: list[str]) -> list[str]:
    """Run a real worker on ``fail`` until one dead letter per message exists;
    return their task ids (the worker is stopped before returning)."""
    producer = Producer(r, keys=KEYS)
    ids = [producer.enqueue("fail", message=m, max_retries=0) for m in messages]
    # one thread: the tasks fail, and are dead-lettered, in the order enqueued
    with processes(start_worker(url, types="fail", imports=EXAMPLES, threads=1)):
        wait_until(lambda: r.llen(KEYS.dead("fail")) == len(messages))
    return ids
