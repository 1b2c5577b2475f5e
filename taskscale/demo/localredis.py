"""A throwaway ``redis-server`` for ``taskscale demo`` and single-machine trials.

The demo must run with no arguments and leave nothing behind, so it starts
its own Redis: the ``redis-server`` binary on a free loopback port, with no
persistence, its working directory in a temp dir that is removed on stop.
(The test suite has its own fixture; this is the shipped equivalent.)
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import redis

from taskscale.connection import ConnectionSettings, connect


@dataclass(frozen=True)
class LocalRedisSettings:
    binary: str = "redis-server"
    #: 0 = pick a free port on 127.0.0.1.
    port: int = 0
    start_timeout_s: float = 10.0
    stop_timeout_s: float = 5.0


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRedis:
    """One ``redis-server`` child process.  Use as a context manager::

    with LocalRedis() as server:
        client = connect(server.url)
    """

    def __init__(self, settings: LocalRedisSettings | None = None) -> None:
        self._settings = settings or LocalRedisSettings()
        self.port = self._settings.port or free_loopback_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> LocalRedis:
        binary = shutil.which(self._settings.binary)
        if binary is None:
            raise RuntimeError(
                f"{self._settings.binary} not found: install it (Debian: apt install redis-server)"
                " or pass --redis-url"
            )
        self._workdir = Path(tempfile.mkdtemp(prefix="taskscale-redis-"))
        self._process = subprocess.Popen(
            [binary, *self._server_args()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C is ours to handle, then we stop it
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _server_args(self) -> list[str]:
        assert self._workdir is not None
        return [
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self._workdir),
            "--loglevel",
            "warning",
        ]

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self._settings.start_timeout_s
        client = connect(ConnectionSettings(self.url, connect_timeout_s=0.2))
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self._process.poll() is not None:
                        raise RuntimeError(
                            f"redis-server exited with {self._process.returncode}"
                            f" (is port {self.port} taken?)"
                        ) from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not answer on {self.port}") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit) and remove its directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(self._settings.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(self._settings.stop_timeout_s)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> LocalRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
