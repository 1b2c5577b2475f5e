"""``taskscale enqueue`` / ``status`` / ``worker`` from the command line, errors included."""

from __future__ import annotations

import json
import subprocess

import pytest
import redis

from support.redis_server import free_port
from support.workers import run_taskscale
from taskscale.keys import Keys

pytestmark = pytest.mark.integration


def run(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_taskscale(url, *argv)


def test_enqueue_then_status_json_reports_queued_and_delayed(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    done = run(redis_url, "enqueue", "sleep", "--kwargs", '{"seconds": 1}', "--count", "3")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 3
    assert run(redis_url, "enqueue", "sleep", "--delay", "60", "--priority", "high").returncode == 0
    status = run(redis_url, "status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    sleep = doc["types"]["sleep"]
    assert (sleep["queued"], sleep["delayed"], sleep["active"]) == (3, 1, 0)
    assert {"completed", "failed", "dead", "idle_since"} <= set(sleep)
    assert doc["workers"] == []
    table = run(redis_url, "status")
    assert table.stdout.splitlines()[0].split()[:4] == ["TYPE", "QUEUED", "DELAYED", "ACTIVE"]
    assert table.stdout.splitlines()[1].split()[:3] == ["sleep", "3", "1"]


def test_wrong_redis_url_is_one_line_not_a_traceback() -> None:
    done = run(f"redis://127.0.0.1:{free_port()}/0", "status")
    assert done.returncode == 1
    assert done.stderr.startswith("taskscale status: cannot reach Redis at 127.0.0.1:")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    bad = run("http://nowhere", "enqueue", "noop")
    assert bad.returncode == 2 and bad.stderr.startswith("taskscale enqueue: invalid Redis URL")


def test_key_of_the_wrong_type_is_one_line_not_a_traceback(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    r.set(keys.types, "oops")
    done = run(redis_url, "enqueue", "noop")
    assert done.returncode == 1
    assert "holds the wrong type of value" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_enqueue_options_are_written_into_the_envelope_and_unset_ones_left_out(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    done = run(redis_url, "enqueue", "noop", "--timeout", "2.5", "--max-retries", "1")
    assert done.returncode == 0, done.stderr
    assert run(redis_url, "enqueue", "noop").returncode == 0
    first, second = (json.loads(raw) for raw in r.lrange(keys.queue("noop"), 0, -1))
    assert (first["timeout_ms"], first["max_retries"]) == (2500, 1)
    assert "timeout_ms" not in second and "max_retries" not in second  # the task's defaults apply


def test_bad_json_arguments_are_refused_and_nothing_is_enqueued(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    done = run(redis_url, "enqueue", "noop", "--args", "{not json")
    assert done.returncode == 2 and "--args is not valid JSON" in done.stderr
    assert r.llen(keys.queue("noop")) == 0


def test_oversize_payload_is_refused_at_enqueue(redis_url: str, r: redis.Redis, keys: Keys) -> None:
    done = run(
        redis_url, "enqueue", "echo", "--args", json.dumps(["x" * 5000]), "--max-bytes", "1000"
    )
    assert done.returncode == 2 and "over the limit of 1000 bytes" in done.stderr
    assert r.llen(keys.queue("echo")) == 0


def test_worker_with_a_missing_task_module_says_so(redis_url: str) -> None:
    done = run(redis_url, "worker", "--types", "noop", "--import", "no_such_module_xyz")
    assert done.returncode == 2
    assert "cannot import task module 'no_such_module_xyz'" in done.stderr
