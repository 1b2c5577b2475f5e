"""Real ``taskscale`` processes, and workers and schedulers in threads: the one
way the tests start them.

Processes run ``python -m taskscale.cli`` as production does, from the
repository root, with ``TASKSCALE_REDIS_URL`` and ``TASKSCALE_NAMESPACE`` set
and a ``PYTHONPATH`` (:func:`pythonpath`) on which they import the tests' task
modules the way the test process does: ``support.*`` from tests/, and the
task modules that sit beside their tests from those folders.  So "across
workers" and "a killed worker" mean exactly that.

Every wait is bounded; every process started is stopped (SIGKILL at worst),
every thread joined.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import redis

import taskscale.examples  # noqa: F401  (in-thread workers serve noop, sleep, echo, fail)
from taskscale.connection import connect
from taskscale.keys import Keys
from taskscale.metrics import WorkerMetrics
from taskscale.redis_urls import RedisClient
from taskscale.scheduling.scheduler import Scheduler, SchedulerSettings
from taskscale.scheduling.scheduler_metrics import SchedulerMetrics
from taskscale.tasks import TaskRegistry
from taskscale.worker import RetryPolicy, Worker, WorkerSettings

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
NAMESPACE = "taskscale"
_logs: dict[int, IO[bytes]] = {}


# --- the environment of a subprocess ------------------------------------------------


def pythonpath() -> str:
    """tests/ (for ``support.*``), then every test folder (the task modules
    beside their tests; tests/test_layout.py keeps their names unique), then
    whatever PYTHONPATH this process inherited."""
    folders = [
        TESTS,
        *sorted(
            p for p in TESTS.iterdir() if p.is_dir() and p.name != "support" and any(p.glob("*.py"))
        ),
    ]
    inherited = os.environ.get("PYTHONPATH")
    return os.pathsep.join([*(str(f) for f in folders), *([inherited] if inherited else [])])


def process_env(url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, pointed at ``url`` and the test namespace,
    with :func:`pythonpath`; ``extra`` last (it may override any of them)."""
    env = dict(os.environ)
    env["TASKSCALE_REDIS_URL"] = url
    env["TASKSCALE_NAMESPACE"] = NAMESPACE
    env["PYTHONPATH"] = pythonpath()
    env.update(extra or {})
    return env


# --- taskscale commands as subprocesses ---------------------------------------------


def taskscale_process(
    url: str, *argv: str, env: Mapping[str, str] | None = None, **popen: Any
) -> subprocess.Popen[Any]:
    """``taskscale ARGV...`` as a subprocess (``popen``: its stdio, ``text``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "taskscale.cli", *argv],
        env=process_env(url, env),
        cwd=REPO,
        **popen,
    )


def run_taskscale(
    url: str,
    *argv: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``taskscale ARGV...`` run to its end; its exit code and output as text
    (``check``: a non-zero exit raises CalledProcessError)."""
    proc = taskscale_process(
        url, *argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    done = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def worker_argv(types: str, *imports: str, **flags: object) -> list[str]:
    """``worker --types TYPES --import M ... --FLAG VALUE ...``: each keyword a
    flag (``idle_wait=0.5`` -> ``--idle-wait 0.5``); a flag not given is the
    command's default."""
    argv = ["worker", "--types", types]
    for module in imports:
        argv += ["--import", module]
    for name, value in flags.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def example_worker(url: str, types: str, *extra: str) -> subprocess.Popen[bytes]:
    """``taskscale worker`` of taskscale.examples' ``types`` (idle wait 0.5 s,
    stderr piped)."""
    argv = worker_argv(types, "taskscale.examples", idle_wait=0.5)
    return taskscale_process(url, *argv, *extra, stderr=subprocess.PIPE)


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


# --- logged processes: started, read and stopped by the test -----------------------


def start(
    url: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``taskscale ARGV...`` (or ``python ARGV`` when argv[0] is ``-c``), its
    output kept for :func:`output` and :func:`stop`."""
    # A file, not a pipe: nobody reads while it runs, and a full pipe would block it.
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop())
    if argv[0] == "-c":
        process: subprocess.Popen[bytes] = subprocess.Popen(
            [sys.executable, *argv],
            env=process_env(url, env),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    else:
        process = taskscale_process(url, *argv, env=env, stdout=log, stderr=subprocess.STDOUT)
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
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A logged ``taskscale worker`` of ``types`` from the ``imports`` modules."""
    argv = worker_argv(
        types,
        *imports,
        threads=threads,
        lease=lease,
        heartbeat=heartbeat,
        grace=grace,
        idle_wait=0.5,
        log_level="WARNING",
    )
    return start(url, argv, env=env)


def start_scheduler(url: str, *, lease: float = 2.0) -> subprocess.Popen[bytes]:
    """A logged ``taskscale scheduler`` that looks again at least every 0.2 s."""
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


def live_pids(r: redis.Redis, keys: Keys) -> set[int]:
    """Pids of registered workers (ids are pod-PID-random)."""
    ids = [text(w) for w in r.zrange(keys.workers, 0, -1)]
    return {int(w.rsplit("-", 2)[1]) for w in ids}


# --- in this process: threads ---------------------------------------------------------


@contextmanager
def running_worker(
    url: str,
    types: tuple[str, ...],
    *,
    threads: int = 2,
    keys: Keys | None = None,
    client: RedisClient | None = None,
    registry: TaskRegistry | None = None,
    metrics: WorkerMetrics | None = None,
    **settings: Any,
) -> Iterator[Worker]:
    """A Worker on ``url`` in a thread of this process, with fast retries and
    a 0.5 s idle wait unless ``settings`` say otherwise; stopped gracefully on
    exit.  Its client is a plain one, as the tests of one server were written
    against; pass ``client=connect(url)`` for Sentinel, TLS or a cluster."""
    settings.setdefault("retry", RetryPolicy(base_s=0.05, jitter=0.0))
    settings.setdefault("idle_wait_s", 0.5)
    worker = Worker(
        client if client is not None else redis.Redis.from_url(url),
        WorkerSettings(types=types, threads=threads, **settings),
        keys=keys or Keys(NAMESPACE),
        registry=registry,
        metrics=metrics,
    )
    with _running(worker.run, worker.request_stop, "worker", join_s=30):
        yield worker


@contextmanager
def running_scheduler(
    url: str,
    *,
    keys: Keys | None = None,
    metrics: SchedulerMetrics | None = None,
    **settings: Any,
) -> Iterator[Scheduler]:
    """A Scheduler on ``url`` (any topology) in a thread of this process,
    with ``settings`` (SchedulerSettings); stopped on exit (within 10 s)."""
    scheduler = Scheduler(
        connect(url),
        keys=keys or Keys(NAMESPACE),
        settings=SchedulerSettings(**settings),
        metrics=metrics,
    )
    with _running(scheduler.run, scheduler.stop, "scheduler", join_s=10):
        yield scheduler


@contextmanager
def _running(
    run: Callable[[], object], request_stop: Callable[[], None], what: str, *, join_s: float
) -> Iterator[None]:
    """``run`` in a thread; on exit ``request_stop`` and check it ended within ``join_s``."""
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        request_stop()
        thread.join(join_s)
        assert not thread.is_alive(), f"{what} did not stop within {join_s} s"
