"""Host plumbing for the local node: pod subnet, cgroups, mounts, leftovers.

These act on the host itself (as root) and are kept apart from
:class:`e2e.cluster.node.LocalNode` so that a detached cluster's ``down`` can
clean up without starting anything.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

POD_SUPERNET = ipaddress.IPv4Network("10.88.0.0/16")
CGROUP_ROOT = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """The local node could not be started or cleaned up."""


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NodeError(f"{' '.join(args)} failed: {result.stderr.strip() or result.stdout}")
    return result


def pick_pod_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.88.0.0/16 that no route on this host uses yet."""
    routes = run("ip", "-4", "route", "show").stdout
    used: set[ipaddress.IPv4Network] = set()
    for line in routes.splitlines():
        with contextlib.suppress(ValueError):
            used.add(ipaddress.IPv4Network(line.split()[0], strict=False))
    for subnet in POD_SUPERNET.subnets(new_prefix=24):
        if subnet.network_address.packed[2] == 0:
            continue
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise NodeError(f"no free /24 left in {POD_SUPERNET}")


def _cgroup_dirs(cgroup_root: str) -> list[Path]:
    """Every directory of ``cgroup_root`` in every cgroup v1 hierarchy, deepest first."""
    found: list[Path] = []
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / cgroup_root.lstrip("/")
        if top.is_dir():
            found.extend(p for p in top.rglob("*") if p.is_dir())
            found.append(top)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def make_cgroup(cgroup_root: str) -> None:
    """Create the kubelet's cgroup root in every cgroup v1 hierarchy."""
    for hierarchy in CGROUP_ROOT.iterdir():
        if not (hierarchy / "cgroup.procs").exists() or (hierarchy / "cgroup.controllers").exists():
            continue  # not a mounted v1 hierarchy (or the unified v2 one)
        top = hierarchy / cgroup_root.lstrip("/")
        top.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # empty in a new cpuset cgroup
            if (hierarchy / knob).exists():
                (top / knob).write_text((hierarchy / knob).read_text())


def _kill_cgroup(cgroup_root: str) -> None:
    """SIGKILL every process left in the node's cgroups, then remove them."""
    for _attempt in range(50):
        pids: set[int] = set()
        for directory in _cgroup_dirs(cgroup_root):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    for directory in _cgroup_dirs(cgroup_root):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _unmount_under(directory: Path) -> None:
    """Unmount everything mounted below ``directory`` (the kubelet's volumes...)."""
    prefix = str(directory.resolve()) + "/"
    mounts = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(prefix):
                mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        run("umount", "-l", point, check=False)


def _kill_shims(address: str) -> None:
    """Kill containerd shims that belong to our containerd (found by its socket)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            if b"containerd-shim" in cmdline[0] and address.encode() in cmdline:
                os.kill(int(proc.name), signal.SIGKILL)


def _other_kube_proxies() -> bool:
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "comm").read_text().strip() == "kube-proxy":
                return True
    return False


def cleanup_detached(state: dict[str, Any]) -> None:
    """Undo what a node left on the host once its processes are gone."""
    _kill_cgroup(state["cgroup_root"])
    _kill_shims(state["containerd_address"])
    _unmount_under(Path(state["dir"]))
    run("ip", "link", "delete", state["bridge"], check=False)
    # kube-proxy's KUBE-* chains are host-wide: only remove them if no other
    # local cluster's kube-proxy is still using them.
    if not _other_kube_proxies():
        run(state["kube_proxy"], "--cleanup", check=False)
