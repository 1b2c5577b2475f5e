"""A real Kubernetes control plane on loopback, for tests and local runs: the command line.

The cluster itself is :class:`e2e.cluster.controlplane.LocalCluster`; its
pieces are in :mod:`e2e.cluster.processes` (binaries, processes),
:mod:`e2e.cluster.pki` (certificates) and :mod:`e2e.cluster.node` (a kubelet
on containerd). This module keeps the names tests import and runs a detached
cluster by hand::

    python -m e2e.cluster.localcluster up [--with-node]   # start, detach
    python -m e2e.cluster.localcluster env                # export KUBECONFIG=...
    python -m e2e.cluster.localcluster down               # stop, clean up
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from e2e.cluster.controlplane import SERVICE_CIDR, LocalCluster
from e2e.cluster.nodehost import cleanup_detached
from e2e.cluster.processes import (
    Binaries,
    ClusterError,
    ensure_binaries,
    find_binaries,
    free_port,
    signal_group,
    start_component,
)

__all__ = [
    "SERVICE_CIDR",
    "Binaries",
    "ClusterError",
    "LocalCluster",
    "ensure_binaries",
    "find_binaries",
    "free_port",
    "main",
    "start_component",
    "stop_detached",
]

DEFAULT_STATE_DIR = Path(tempfile.gettempdir()) / f"taskscale-localcluster-{os.getuid()}"


def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def _process_is(pid: int, exe: str) -> bool:
    """True if ``pid`` still runs ``exe`` (guards against pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == exe


def stop_detached(state_dir: Path, timeout: float = 15.0) -> bool:
    """Stop a cluster started by ``up``; False if there was none."""
    path = _state_file(state_dir)
    if not path.exists():
        return False
    state = json.loads(path.read_text())
    for component in reversed(state["components"]):
        pid, exe = int(component["pid"]), component["exe"]
        if not _process_is(pid, exe):
            continue
        signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _process_is(pid, exe) and time.monotonic() < deadline:
            time.sleep(0.1)
        signal_group(pid, signal.SIGKILL)
    if state.get("node"):
        cleanup_detached(state["node"])
    shutil.rmtree(state["workdir"], ignore_errors=True)
    path.unlink(missing_ok=True)
    return True


def _print_env(env: Mapping[str, str], out: IO[str]) -> None:
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.cluster.localcluster",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("command", choices=["up", "down", "env", "build"])
    parser.add_argument(
        "--with-node",
        action="store_true",
        help="also start kube-scheduler and a kubelet on containerd (root)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help=f"where a detached cluster lives (default {DEFAULT_STATE_DIR})",
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="startup timeout, seconds")
    args = parser.parse_args(argv)
    state_path = _state_file(args.state_dir)

    if args.command == "build":
        binaries = ensure_binaries(with_node=args.with_node)
        print(f"binaries in {binaries.kube_bin_dir}, {binaries.etcd}, {binaries.helm}")
        return 0
    if args.command == "down":
        stopped = stop_detached(args.state_dir)
        print("stopped" if stopped else f"no cluster recorded in {args.state_dir}")
        return 0
    if args.command == "env":
        if not state_path.exists():
            print(f"no cluster recorded in {args.state_dir}; run `up` first", file=sys.stderr)
            return 1
        _print_env(json.loads(state_path.read_text())["env"], sys.stdout)
        return 0

    if state_path.exists():
        print(
            f"a cluster is already recorded in {args.state_dir}; run `down` first", file=sys.stderr
        )
        return 1
    args.state_dir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        with_node=args.with_node, workdir=args.state_dir / "cluster", startup_timeout=args.timeout
    )
    try:
        cluster.start()
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        shutil.rmtree(args.state_dir / "cluster", ignore_errors=True)
        return 1
    state = cluster.state()
    if cluster.node is not None:
        state["node"] = cluster.node.state()
    state_path.write_text(json.dumps(state, indent=2) + "\n")
    print(f"cluster up: {cluster.server} (logs in {cluster.log_dir})", file=sys.stderr)
    _print_env(cluster.env(), sys.stdout)
    # Detach: the components run in their own sessions and outlive us.
    for component in cluster.components:
        component.process.returncode = 0  # keep Popen.__del__ quiet
    return 0


if __name__ == "__main__":
    sys.exit(main())
