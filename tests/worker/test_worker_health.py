"""A worker's /healthz and /readyz follow its lease, beside /metrics."""

from __future__ import annotations

import signal
import subprocess
import urllib.error
import urllib.request

import pytest
import redis

from support.redis_server import free_port
from support.waiting import wait_until
from support.workers import taskscale_process
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def status(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_ready_while_leased_not_ready_while_draining(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    port = free_port()
    proc = taskscale_process(
        redis_url,
        "worker",
        "--import", "taskscale.examples",
        "--types", "sleep",
        "--threads", "1",
        "--grace", "30",
        "--metrics-port", str(port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until(lambda: status(port, "/readyz")[0] == 200)
        assert status(port, "/healthz") == (200, "ok\n")
        code, text = status(port, "/metrics")
        assert code == 200 and "taskscale_worker_threads 1.0" in text
        producer.enqueue("sleep", seconds=3)
        wait_until(lambda: int(r.hget(keys.active, "sleep") or 0) == 1)
        proc.send_signal(signal.SIGTERM)
        # Draining: still alive, no longer ready (a Service stops sending it work).
        wait_until(lambda: status(port, "/readyz")[0] == 503)
        assert status(port, "/healthz")[0] == 200
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    assert int(r.hget(keys.stats("sleep"), "completed") or 0) == 1
