"""Real ``taskscale`` processes for the RPC, fan-out and registry tests.

Workers, schedulers and callers run as separate OS processes, as they do in
production, so "across workers" and "a killed worker" mean exactly that.
Every wait is bounded; every process started is stopped (SIGKILL at worst).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from support.waiting import wait_until as _wait_until

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
#: Folders whose modules (the test task modules) worker processes can import.
TASK_DIRS = (TESTS / "fanout", TESTS / "rpc", TESTS / "registry", TESTS / "options")
NAMESPACE = "taskscale"
_logs: dict[int, IO[bytes]] = {}


def wait_until(
    predicate: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.05
) -> Any:
    """:func:`waiting.wait_until` with the longer defaults multi-process tests need."""
    return _wait_until(predicate, timeout=timeout, interval=interval)


def process_env(url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["TASKSCALE_REDIS_URL"] = url
    env["TASKSCALE_NAMESPACE"] = NAMESPACE
    paths = [str(p) for p in TASK_DIRS]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


def start(
    url: str, argv: Sequence[str], *, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m taskscale.cli ARGV...`` (or ``python ARGV`` when argv[0] is ``-c``)."""
    command = (
        [sys.executable, *argv]
        if argv[0] == "-c"
        else [sys.executable, "-m", "taskscale.cli", *argv]
    )
    # A file, not a pipe: nobody reads while it runs, and a full pipe would block it.
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop())
    process = subprocess.Popen(
        command, env=process_env(url, env), cwd=REPO, stdout=log, stderr=subprocess.STDOUT
    )
    _logs[process.pid] = log
    return process


def start_worker(
    url: str,
    *,
    types: str,
    imports: Sequence[str],
    threads: int = 2,
    lease: float = 10.0,
    heartbeat: float = 1.0,
    grace: float = 10.0,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    argv = ["worker", "--types", types, "--threads", str(threads), "--lease", str(lease)]
    argv += ["--heartbeat", str(heartbeat), "--grace", str(grace), "--idle-wait", "0.5"]
    argv += ["--log-level", "WARNING"]
    for module in imports:
        argv += ["--import", module]
    return start(url, argv, env=env)


def start_scheduler(url: str, *, lease: float = 2.0) -> subprocess.Popen[bytes]:
    return start(
        url, ["scheduler", "--lease", str(lease), "--max-sleep", "0.2", "--log-level", "WARNING"]
    )


def stop(process: subprocess.Popen[bytes], *, timeout: float = 20.0) -> str:
    """SIGTERM, wait, SIGKILL if needed; return what it printed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
    text = output(process)
    log = _logs.pop(process.pid, None)
    if log is not None:
        log.close()
    return text


def output(process: subprocess.Popen[bytes]) -> str:
    """What the process printed so far (stdout and stderr)."""
    log = _logs.get(process.pid)
    if log is None:
        return ""
    log.seek(0)
    return log.read().decode(errors="replace")


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL: no shutdown code runs, as when a node dies or the OOM killer strikes."""
    process.kill()
    process.wait(20)


@contextmanager
def processes(*started: subprocess.Popen[bytes]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Stop every process on exit, whatever happened."""
    procs = list(started)
    try:
        yield procs
    finally:
        for process in procs:
            stop(process)


def text(value: object) -> str:
    """A Redis reply value as text (the test clients don't decode responses)."""
    return value.decode() if isinstance(value, bytes) else str(value)
