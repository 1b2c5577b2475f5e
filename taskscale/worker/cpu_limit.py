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

Which cgroup: the process's own, named in ``/proc/self/cgroup`` (the
``0::/path`` line on v2, the line listing the ``cpu`` controller on v1).
In a container with a private cgroup namespace that path is ``/`` and the
files are at the mount's top; without one (an older runtime, cgroup v1,
``--cgroupns=host``) the mount shows the whole host tree and the limit is
in the container's directory below it, e.g.
``/sys/fs/cgroup/kubepods/burstable/pod<uid>/<container>/cpu.max``.  The
own directory and every ancestor up to the top are read and the smallest
limit wins (a quota on a parent caps its children too); when the own path is
unknown or not under this mount, only the top is read, as before.

The cgroup root is ``/sys/fs/cgroup`` unless ``TASKSCALE_CGROUP_ROOT``
names another directory (tests use a temporary one; it also helps where
the cgroup is mounted elsewhere).  Reading never fails: a file that is
missing or unreadable counts as "no limit".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath

#: The environment variable that overrides the cgroup root.
CGROUP_ROOT_ENV = "TASKSCALE_CGROUP_ROOT"
DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Where the kernel says which cgroups this process is in.
PROC_SELF_CGROUP = Path("/proc/self/cgroup")

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


def own_cgroups(text: str | None) -> tuple[str | None, str | None]:
    """``(v2 path, v1 cpu path)`` from the text of ``/proc/self/cgroup``;
    None where it names none.  A path that climbs (``/..``, seen when the
    cgroup namespace's root is below the process's cgroup) counts as unknown."""
    v2: str | None = None
    v1: str | None = None
    for line in (text or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, sep, path = rest.partition(":")
        if not sep or not path.startswith("/") or ".." in PurePosixPath(path).parts:
            continue
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _upwards(base: Path, path: str | None) -> Iterator[Path]:
    """``base/path``, then each parent directory up to ``base`` itself."""
    parts = PurePosixPath(path).parts[1:] if path else ()
    for depth in range(len(parts), -1, -1):
        yield base.joinpath(*parts[:depth])


def _v2_limit(directory: Path) -> tuple[bool, int | None]:
    """(whether ``cpu.max`` is there, the limit it sets)."""
    text = _read(directory / "cpu.max")
    if text is None:
        return False, None
    fields = text.split()
    if not fields or fields[0] == "max":
        return True, None
    try:
        quota = int(fields[0])
        period = int(fields[1]) if len(fields) > 1 else 100_000
    except ValueError:
        return True, None
    return True, _ceil_ratio(quota, period)


def _v1_limit(directory: Path) -> tuple[bool, int | None]:
    """(whether the quota files are there, the limit they set)."""
    quota_text = _read(directory / "cpu.cfs_quota_us")
    period_text = _read(directory / "cpu.cfs_period_us")
    if quota_text is None or period_text is None:
        return False, None
    try:
        return True, _ceil_ratio(int(quota_text), int(period_text))
    except ValueError:
        return True, None


def _along(
    base: Path, path: str | None, read: Callable[[Path], tuple[bool, int | None]]
) -> tuple[bool, int | None]:
    """Read ``base/path`` and its ancestors: whether any had the files, and
    the smallest limit they set."""
    found = [read(d) for d in _upwards(base, path)]
    limits = [limit for there, limit in found if there and limit is not None]
    return any(there for there, _ in found), min(limits, default=None)


def cgroup_cpu_limit(root: Path, *, self_cgroup: str | None = None) -> int | None:
    """The CPU limit under ``root``, rounded up to whole CPUs; None when
    unlimited or unknown.  ``self_cgroup`` is the text of
    ``/proc/self/cgroup`` (read when not given).  cgroup v2 (``cpu.max`` in
    the own directory and its ancestors) is read first, then v1."""
    text = _read(PROC_SELF_CGROUP) if self_cgroup is None else self_cgroup
    v2_path, v1_path = own_cgroups(text)
    there, limit = _along(root, v2_path, _v2_limit)
    if there:
        return limit
    for sub in _V1_DIRS:
        there, limit = _along(root / sub, v1_path, _v1_limit)
        if there:
            return limit
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


def auto_processes(*, root: Path | None = None, self_cgroup: str | None = None) -> int:
    """What ``--processes auto`` means here: the container's CPU limit
    (rounded up, at least 1), or the available CPUs when unlimited."""
    limit = cgroup_cpu_limit(cgroup_root() if root is None else root, self_cgroup=self_cgroup)
    return max(1, limit) if limit is not None else available_cpus()
