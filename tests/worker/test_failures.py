"""What a failing task leaves behind: a logged traceback, a dead letter that
keeps it, no retries for arguments that cannot bind, a bounded dead list."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from support.waiting import wait_until
from support.workers import running_worker
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.tasks import TaskRegistry

pytestmark = pytest.mark.integration


def explode(depth: int) -> None:
    """Fails a few frames deep, so the traceback names this function."""
    if depth:
        explode(depth - 1)
    raise RuntimeError("boom at the bottom")


def add(a: int, b: int = 1) -> int:
    return a + b


def registry() -> TaskRegistry:
    reg = TaskRegistry()
    reg.register("explode", explode)
    reg.register("add", add)
    return reg


def dead_records(r: redis.Redis, keys: Keys, task_type: str) -> list[dict[str, str]]:
    return [json.loads(d) for d in r.lrange(keys.dead(task_type), 0, -1)]


def test_failure_is_logged_with_traceback_and_the_dead_letter_keeps_it(
    redis_url: str,
    r: redis.Redis,
    keys: Keys,
    producer: Producer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    task_id = producer.enqueue("explode", 2, max_retries=0)
    with (
        caplog.at_level(logging.ERROR, logger="taskscale.worker"),
        running_worker(redis_url, ("explode",), threads=1, registry=registry()),
    ):
        wait_until(lambda: r.llen(keys.dead("explode")) == 1)
    [dead] = dead_records(r, keys, "explode")
    assert dead["error"] == "RuntimeError: boom at the bottom"
    assert "Traceback (most recent call last)" in dead["traceback"]
    assert dead["traceback"].count("in explode") == 3
    logged = [rec.getMessage() for rec in caplog.records if task_id in rec.getMessage()]
    assert len(logged) == 1
    assert "explode" in logged[0] and "attempt 1 of 1" in logged[0]
    assert "RuntimeError: boom at the bottom" in logged[0]
    assert "in explode" in logged[0]  # the traceback itself, not only the message


def test_arguments_that_cannot_bind_are_dead_lettered_without_retries(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("add", 1, 2, 3, max_retries=5)  # one positional too many
    producer.enqueue("add", 1, c=4, max_retries=5)  # an unknown keyword
    good = producer.enqueue("add", 1, b=2, max_retries=5)
    with running_worker(redis_url, ("add",), threads=1, registry=registry()):
        wait_until(lambda: r.llen(keys.dead("add")) == 2)
        wait_until(lambda: int(r.hget(keys.stats("add"), "completed") or 0) == 1)
    records = dead_records(r, keys, "add")
    assert all(
        d["error"].startswith("TypeError: arguments do not match add(a, b=1)") for d in records
    )
    assert "too many positional arguments" in records[0]["error"]
    assert "unexpected keyword argument 'c'" in records[1]["error"]
    assert [json.loads(d["envelope"])["attempts"] for d in records] == [0, 0]
    assert int(r.hget(keys.stats("add"), "retried") or 0) == 0
    assert r.zcard(keys.delayed("add")) == 0  # nothing waiting for a retry
    assert good not in {json.loads(d["envelope"])["id"] for d in records}


def test_dead_letter_cap_keeps_the_newest(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    for n in range(5):
        producer.enqueue("explode", n % 2, max_retries=0)
    with running_worker(redis_url, ("explode",), threads=1, registry=registry(), dead_letter_cap=2):
        wait_until(lambda: int(r.hget(keys.stats("explode"), "dead") or 0) == 5)
    assert r.llen(keys.dead("explode")) == 2
    assert int(r.hget(keys.stats("explode"), "dead_dropped") or 0) == 3


def test_dead_letter_cap_also_bounds_envelopes_the_claim_cannot_take(
    redis_url: str, r: redis.Redis, keys: Keys
) -> None:
    r.rpush(keys.queue("explode"), *(f"not json {n}" for n in range(5)))
    with running_worker(redis_url, ("explode",), threads=1, registry=registry(), dead_letter_cap=2):
        wait_until(lambda: int(r.hget(keys.stats("explode"), "dead") or 0) == 5)
    assert [json.loads(d)["envelope"] for d in r.lrange(keys.dead("explode"), 0, -1)] == [
        "not json 3",
        "not json 4",
    ]
    assert int(r.hget(keys.stats("explode"), "dead_dropped") or 0) == 3


def test_worker_imports_a_task_module_from_the_current_directory(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer, tmp_path: Path
) -> None:
    (tmp_path / "mytasks_cwd.py").write_text(
        textwrap.dedent(
            """
            from taskscale import task

            @task("cwd.echo")
            def echo(x):
                return x
            """
        )
    )
    producer.enqueue("cwd.echo", 7)
    # The console script, as a user runs it (python -m would put cwd first anyway).
    script = Path(sys.executable).with_name("taskscale")
    proc = subprocess.Popen(
        [
            str(script),
            "worker",
            "--import",
            "mytasks_cwd",
            "--types",
            "cwd.echo",
            "--redis-url",
            redis_url,
            "--namespace",
            keys.namespace,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(
            lambda: (
                int(r.hget(keys.stats("cwd.echo"), "completed") or 0) == 1
                or proc.poll() is not None
            )
        )
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert int(r.hget(keys.stats("cwd.echo"), "completed") or 0) == 1, out.decode()
