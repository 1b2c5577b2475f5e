"""Running the cluster's binaries: where build.sh put them, and one process per component.

Every component of the local cluster (etcd, the control plane, the node's
daemons) is a plain process, the leader of its own process group, logging to
a file; :class:`Component` stops the whole group.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLUSTER_DIR = Path(__file__).resolve().parent
BUILD_SCRIPT = CLUSTER_DIR / "build.sh"


class ClusterError(RuntimeError):
    """The local cluster could not be built, started or stopped."""


# --- binaries -----------------------------------------------------------------


@dataclass(frozen=True)
class Binaries:
    """Where ``build.sh`` put the pinned binaries."""

    kube_version: str
    kube_bin_dir: Path
    etcd: Path
    helm: Path

    def kube(self, name: str) -> Path:
        """Path of one Kubernetes binary, e.g. ``kube("kubectl")``."""
        return self.kube_bin_dir / name

    @classmethod
    def from_env_lines(cls, text: str) -> Binaries:
        values = dict(
            line.split("=", 1) for line in text.splitlines() if "=" in line and line[:1].isupper()
        )
        try:
            return cls(
                kube_version=values["TASKSCALE_KUBE_VERSION"],
                kube_bin_dir=Path(values["TASKSCALE_KUBE_BIN_DIR"]),
                etcd=Path(values["TASKSCALE_ETCD_BIN"]),
                helm=Path(values["TASKSCALE_HELM_BIN"]),
            )
        except KeyError as exc:
            raise ClusterError(f"build.sh printed no {exc.args[0]}: {text!r}") from None


def _build_args(with_node: bool) -> list[str]:
    return ["bash", str(BUILD_SCRIPT), *(["--with-node"] if with_node else [])]


def find_binaries(*, with_node: bool = False) -> Binaries | None:
    """The cached binaries if they are built and current, else None (never builds)."""
    result = subprocess.run(
        [*_build_args(with_node), "--check", "--print-env"],
        capture_output=True,
        text=True,
        check=False,
    )
    return Binaries.from_env_lines(result.stdout) if result.returncode == 0 else None


def build_binaries(*, with_node: bool = False) -> Binaries:
    """Run ``build.sh`` (a no-op when warm); its progress goes to our stderr."""
    result = subprocess.run(_build_args(with_node), stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise ClusterError(
            f"{BUILD_SCRIPT} failed with exit code {result.returncode}; see its messages above"
        )
    return Binaries.from_env_lines(result.stdout)


def ensure_binaries(
    *, with_node: bool = False, announce: Callable[[str], None] | None = None
) -> Binaries:
    """The cached binaries, building them first (long, once per machine) if needed."""
    found = find_binaries(with_node=with_node)
    if found is not None:
        return found
    (announce or _stderr)(
        f"taskscale: Kubernetes binaries are not built yet; running {BUILD_SCRIPT}. "
        "The first build compiles Kubernetes, etcd and helm from source "
        "(tens of minutes on 2 cores); later runs reuse the cache."
    )
    return build_binaries(with_node=with_node)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- small helpers ------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    # The flag dump that components log at start-up says nothing useful.
    kept = [line for line in text.splitlines() if "flags.go" not in line]
    return "\n".join(kept[-lines:])


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


# --- processes ----------------------------------------------------------------


@dataclass
class Component:
    """One running binary, the leader of its own process group."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise ClusterError(
                f"{self.name} exited with code {code}; last lines of {self.log}:\n{tail(self.log)}"
            )

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
        # Children left in the group (none expected) go too.
        signal_group(self.process.pid, signal.SIGKILL)


def start_component(
    name: str, argv: Sequence[str | Path], log_dir: Path, env: Mapping[str, str] | None = None
) -> Component:
    """Start ``argv`` in a new session (own process group), logging to ``log_dir``."""
    log = log_dir / f"{name}.log"
    args = [str(a) for a in argv]
    with log.open("ab") as out:
        out.write(f"$ {shlex.join(args)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    return Component(name, process, log)
