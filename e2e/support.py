"""Helpers the e2e fixtures and tests share: images, a host redis-server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import redis

E2E_DIR = Path(__file__).resolve().parent
REPO = E2E_DIR.parent
# The e2e suite reuses the test suite's cluster fixture and chart helpers
# (tests/support, imported as ``support`` as the tests do).
for _extra in (REPO, REPO / "tests"):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))

from support.kube_cluster import wait_for  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- Redis on the host -----------------------------------------------------------


@dataclass
class HostRedis:
    """redis-server bound to ``host`` (0.0.0.0 when pods must reach it)."""

    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ts-e2e-redis-")))

    def start(self) -> HostRedis:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                self.host,
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for(self._ping, timeout=20, what="redis-server")
        return self

    def _ping(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port).ping())
        except redis.ConnectionError:
            return False

    def url(self, address: str = "127.0.0.1") -> str:
        return f"redis://{address}:{self.port}/0"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=20)
        shutil.rmtree(self.workdir, ignore_errors=True)


def build_images() -> dict[str, str]:
    result = subprocess.run(
        ["bash", str(E2E_DIR / "images.sh"), "--tag", "e2e"],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        timeout=1800,
    )
    return dict(line.split("=", 1) for line in result.stdout.split())
