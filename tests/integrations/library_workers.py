"""Real Celery and RQ workers as subprocesses, for the integration tests.

Each runs the test apps in this folder against the test's redis-server,
logs to a file (shown when a test fails) and is stopped with SIGTERM (warm
shutdown), or SIGKILL when a test means to kill it.  Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import redis

from support.waiting import wait_until
from support.workers import process_env
from taskscale.keys import Keys

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def broker_url(redis_url: str, db: int = 1) -> str:
    """``redis_url`` on another database: the queue's keys apart from taskscale's."""
    return redis_url.rsplit("/", 1)[0] + f"/{db}"


class WorkerProcess:
    """One worker subprocess; a context manager that stops it on exit."""

    def __init__(
        self, argv: list[str], *, redis_url: str, keys: Keys, log: Path, lease_s: float
    ) -> None:
        self.argv, self.keys, self.log = argv, keys, log
        self.env = process_env(
            redis_url,
            {
                "TEST_JOBS_REDIS_URL": redis_url,
                "TASKSCALE_NAMESPACE": keys.namespace,
                "TEST_CELERY_BROKER": broker_url(redis_url),
                "TEST_TRACK_LEASE": str(lease_s),
            },
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, r: redis.Redis) -> WorkerProcess:
        """Start and wait until the worker joined the namespace (its lease is in Redis)."""
        before = set(r.zrange(self.keys.tracked_processes, 0, -1))
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                cwd=HERE,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # SIGKILL takes its children (RQ's horse) too
            )

        def joined() -> bool:
            assert self.process is not None and self.process.poll() is None, self.output()
            return bool(set(r.zrange(self.keys.tracked_processes, 0, -1)) - before)

        wait_until(joined, timeout=60, interval=0.1)
        return self

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send ``sig`` (SIGKILL: to the whole process group, as a pod dies) and
        wait for the exit (SIGKILL after 60 s); the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            if sig == signal.SIGKILL:
                self._kill_group()
            else:
                self.process.send_signal(sig)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self._kill_group()
            return self.process.wait(10)
        finally:
            self._kill_group()  # no stray horse or child outlives the test

    def _kill_group(self) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def children(self) -> list[int]:
        """Pids of the worker's child processes (a prefork pool's, RQ's horse)."""
        assert self.process is not None
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()
        if exc_type is not None:
            sys.stderr.write(f"--- worker log ({' '.join(self.argv)}):\n{self.output()}\n")


def celery_worker(
    *,
    redis_url: str,
    keys: Keys,
    log: Path,
    queue: str,
    concurrency: int = 4,
    lease_s: float = 30,
    pool: str = "threads",
) -> WorkerProcess:
    """``celery worker`` on ``pool``, consuming ``queue`` only."""
    argv = [str(BIN / "celery"), "-A", "celery_app", "worker", "--pool", pool]
    argv += ["-c", str(concurrency), "--without-mingle", "--without-gossip"]
    argv += ["--without-heartbeat", "-Q", queue, "-n", f"{queue}-{os.getpid()}@localhost"]
    argv += ["--loglevel", "INFO"]
    return WorkerProcess(argv, redis_url=redis_url, keys=keys, log=log, lease_s=lease_s)


def rq_worker(
    *,
    redis_url: str,
    keys: Keys,
    log: Path,
    queue: str,
    worker_class: str = "taskscale.integrations.rq.TrackingWorker",
    lease_s: float = 30,
) -> WorkerProcess:
    """``rq worker -w <worker_class>`` on ``queue`` (not burst: SIGTERM ends it)."""
    argv = [str(BIN / "rq"), "worker", "-w", worker_class, "--url", broker_url(redis_url)]
    argv += ["--logging_level", "INFO", queue]
    process = WorkerProcess(argv, redis_url=redis_url, keys=keys, log=log, lease_s=lease_s)
    process.env["TASKSCALE_TRACK_LEASE"] = str(lease_s)
    return process
