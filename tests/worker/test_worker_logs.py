"""--log-format json on the long-running commands, end to end: a worker's
records outside a task carry its id as a field, so do the supervisor's
records about a worker process, and the dashboard's uvicorn logs through the
same handler instead of its own text lines."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import redis

from support.redis_server import free_port
from support.waiting import wait_until
from taskscale.keys import Keys

REPO = Path(__file__).resolve().parents[2]


def run_until(
    argv: list[str], ready: Any, *, timeout: float = 60.0
) -> tuple[int, list[dict[str, Any]]]:
    """Start ``taskscale ARGV``, wait until ``ready(lines so far)``, SIGTERM it;
    its exit code and every stderr line (JSON objects; a non-JSON line fails)."""
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "taskscale.cli", *argv],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:

            def lines() -> list[str]:
                err.seek(0)
                return err.read().decode().splitlines()

            wait_until(lambda: ready(lines()) or process.poll() is not None, timeout=timeout)
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return code, [json.loads(line) for line in lines()]


@pytest.mark.integration
def test_a_workers_records_carry_its_id_as_a_json_field(redis_url: str, r: redis.Redis) -> None:
    argv = ["worker", "--types", "noop", "--import", "taskscale.examples", "--worker-id", "w-json"]
    argv += ["--log-format", "json"]
    argv += ["--redis-url", redis_url, "--grace", "0", "--idle-wait", "0.2"]
    keys = Keys()

    def lease_lost(lines: list[str]) -> bool:
        # once it serves, take its lease away: its claimer thread (not the
        # main thread) notices and logs it
        if any("serving" in line for line in lines):
            r.zrem(keys.workers, "w-json")
        return any("lease lost" in line for line in lines)

    code, records = run_until(argv, lease_lost)

    assert code == 0
    worker = [r for r in records if r["logger"] == "taskscale.worker"]
    messages = [r["message"] for r in worker]
    assert any("serving noop" in m for m in messages), messages
    assert any("lease lost" in m for m in messages), messages
    assert any("SIGTERM received" in m for m in messages), messages
    assert any("stopped" in m for m in messages), messages
    assert {r.get("worker_id") for r in worker} == {"w-json"}


@pytest.mark.slow
@pytest.mark.integration
def test_the_supervisors_records_about_a_worker_process_carry_its_id(redis_url: str) -> None:
    argv = ["worker", "--types", "noop", "--import", "taskscale.examples", "--worker-id", "pod"]
    argv += ["--processes", "2"]
    argv += ["--log-format", "json", "--redis-url", redis_url, "--grace", "0"]
    argv += ["--idle-wait", "0.2"]

    code, records = run_until(
        argv, lambda lines: sum("serving" in line for line in lines) >= 2, timeout=90
    )

    assert code == 0
    started = [r for r in records if r["message"].startswith("started worker ")]
    assert sorted(r["worker_id"] for r in started) == ["pod-0", "pod-1"]
    for r in started:
        assert r["message"].startswith(f"started worker {r['worker_id']} ")
    serving = [r for r in records if "serving" in r["message"]]
    assert sorted(r["worker_id"] for r in serving) == ["pod-0", "pod-1"]


@pytest.mark.integration
def test_the_dashboards_uvicorn_records_are_json_too(redis_url: str, r: redis.Redis) -> None:
    pytest.importorskip("uvicorn")
    port = free_port()
    argv = ["dashboard", "--port", str(port), "--log-format", "json", "--redis-url", redis_url]
    argv += ["--namespace", Keys().namespace]
    sent: list[bool] = []

    def garbage_sent(lines: list[str]) -> bool:
        if not sent:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) != 0:
                    return False
                probe.sendall(b"\x00\x01 not http\r\n\r\n")  # uvicorn: a warning
                sent.append(True)
        return any("Invalid HTTP request" in line for line in lines)

    code, records = run_until(argv, garbage_sent)

    assert code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it drained on
    invalid = [r for r in records if "Invalid HTTP request" in r["message"]]
    assert invalid and invalid[0]["logger"].startswith("uvicorn")
    assert invalid[0]["level"] == "WARNING" and "time" in invalid[0]
