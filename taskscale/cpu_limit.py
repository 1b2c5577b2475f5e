"""How many CPUs this container may use, for ``taskscale worker --processes auto``.

A container's CPU limit is not what ``os.cpu_count()`` says (that is the
node's cores): Kubernetes writes ``resources.limits.cpu`` into the cgroup
as a quota per period.  cgroup v2 has one file, ``cpu.max``, holding
``"<quota> <period>"`` or ``"max <period>"`` (unlimited); cgroup v1 has
``cpu.cfs_quota_us`` (-1: unlimited) and ``cpu.cfs_period_us`` in the
``cpu`` controller's directory.  A fractional limit rounds up (1.5 CPUs
run 2 processes, each using part of its core); with no limit the answer is
the CPUs this process may run on (``sched_getaffinity``, else
``os.cpu_count()``).

The cgroup root is ``/sys/fs/cgroup`` unless ``TASKSCALE_CGROUP_ROOT``
names another directory (tests use a temporary one; it also helps where
the cgroup is mounted elsewhere).  Reading never fails: a file that is
missing or unreadable counts as "no limit".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The environment variable that overrides the cgroup root.
CGROUP_ROOT_ENV = "TASKSCALE_CGROUP_ROOT"
DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")

#: Where cgroup v1's ``cpu`` controller may be, relative to the root.
_V1_DIRS = ("cpu", "cpu,cpuacct", "cpuacct,cpu", ".")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _ceil_ratio(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:
        return None
    return -(-quota // period)


def cgroup_cpu_limit(root: Path) -> int | None:
    """The CPU limit under ``root``, rounded up to whole CPUs; None when
    unlimited or unknown.  cgroup v2 (``cpu.max``) is read first, then v1."""
    text = _read(root / "cpu.max")
    if text is not None:
        fields = text.split()
        if not fields or fields[0] == "max":
            return None
        try:
            quota = int(fields[0])
            period = int(fields[1]) if len(fields) > 1 else 100_000
        except ValueError:
            return None
        return _ceil_ratio(quota, period)
    for sub in _V1_DIRS:
        quota_text = _read(root / sub / "cpu.cfs_quota_us")
        period_text = _read(root / sub / "cpu.cfs_period_us")
        if quota_text is None or period_text is None:
            continue
        try:
            return _ceil_ratio(int(quota_text), int(period_text))
        except ValueError:
            return None
    return None


def available_cpus() -> int:
    """The CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def cgroup_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$TASKSCALE_CGROUP_ROOT``, or ``/sys/fs/cgroup``."""
    env = os.environ if environ is None else environ
    value = env.get(CGROUP_ROOT_ENV)
    return Path(value) if value else DEFAULT_CGROUP_ROOT


def auto_processes(*, root: Path | None = None) -> int:
    """What ``--processes auto`` means here: the container's CPU limit
    (rounded up, at least 1), or the available CPUs when unlimited."""
    limit = cgroup_cpu_limit(cgroup_root() if root is None else root)
    return max(1, limit) if limit is not None else available_cpus()
