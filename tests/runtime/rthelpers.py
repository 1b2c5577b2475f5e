"""Helpers of the runtime tests: bounded waits, in-process workers, subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from taskscale.keys import Keys
from taskscale.metrics import WorkerMetrics
from taskscale.tasks import TaskRegistry
from taskscale.worker import RetryPolicy, Worker, WorkerSettings

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@contextmanager
def running_worker(
    url: str,
    types: tuple[str, ...],
    *,
    threads: int = 2,
    registry: TaskRegistry | None = None,
    metrics: WorkerMetrics | None = None,
    **settings: Any,
) -> Iterator[Worker]:
    """A Worker running in a thread of this process; stopped (gracefully) on exit."""
    settings.setdefault("retry", RetryPolicy(base_s=0.05, jitter=0.0))
    settings.setdefault("idle_wait_s", 0.5)
    worker = Worker(
        redis.Redis.from_url(url),
        WorkerSettings(types=types, threads=threads, **settings),
        keys=Keys("taskscale"),
        registry=registry,
        metrics=metrics,
    )
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(worker.run()), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(30)
        assert not thread.is_alive(), "worker did not stop"


def taskscale_process(url: str, *argv: str, **popen: Any) -> subprocess.Popen[bytes]:
    """``taskscale ARGV...`` as a subprocess, with tests/runtime importable."""
    env = dict(os.environ)
    env["TASKSCALE_REDIS_URL"] = url
    env["TASKSCALE_NAMESPACE"] = "taskscale"
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-m", "taskscale.cli", *argv],
        env=env,
        cwd=REPO,
        **popen,
    )


def sigterm_twice(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM a worker started with ``stderr=PIPE``, wait until it logged
    that it is stopping (signals don't queue), SIGTERM again; its exit code."""
    proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    for _ in range(100):
        if b"stopping" in proc.stderr.readline():
            break
    proc.send_signal(signal.SIGTERM)
    return proc.wait(30)


def example_worker(url: str, types: str, *extra: str) -> subprocess.Popen[bytes]:
    """``taskscale worker`` of taskscale.examples' ``types`` (idle wait 0.5 s,
    stderr piped)."""
    return taskscale_process(
        url,
        "worker",
        "--import",
        "taskscale.examples",
        "--types",
        types,
        "--idle-wait",
        "0.5",
        *extra,
        stderr=subprocess.PIPE,
    )
