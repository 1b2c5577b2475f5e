"""``--processes auto``: the CPU limit read from cgroup files, on fixture
directories standing in for /sys/fs/cgroup."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from taskscale.cli.common import processes
from taskscale.worker.cpu_limit import (
    CGROUP_ROOT_ENV,
    auto_processes,
    available_cpus,
    cgroup_cpu_limit,
    cgroup_root,
    own_cgroups,
)

#: /proc/self/cgroup of a process in a private cgroup namespace (v2), and of
#: a container's process without one (v2, then a v1 host: the cpu controller's line).
PRIVATE = "0::/\n"
V2_HOST_VIEW = "0::/kubepods/burstable/pod1/ctr\n"
V1_HOST_VIEW = "12:memory:/kubepods/pod1/ctr\n3:cpu,cpuacct:/kubepods/pod1/ctr\n1:name=systemd:/x\n"


def cgroup(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [
        ("200000 100000\n", 2),
        ("150000 100000\n", 2),  # 1.5 CPUs round up
        ("100001 100000\n", 2),
        ("50000 100000\n", 1),  # half a CPU still runs one process
        ("400000 50000\n", 8),  # another period
        ("300000\n", 3),  # no period: the default 100 ms
    ],
)
def test_cgroup_v2_quota_over_period_rounded_up(
    tmp_path: Path, cpu_max: str, expected: int
) -> None:
    assert cgroup_cpu_limit(cgroup(tmp_path, {"cpu.max": cpu_max})) == expected


@pytest.mark.parametrize("cpu_max", ["max 100000\n", "", "lots of\n", "0 100000\n"])
def test_cgroup_v2_unlimited_or_unreadable_is_no_limit(tmp_path: Path, cpu_max: str) -> None:
    assert cgroup_cpu_limit(cgroup(tmp_path, {"cpu.max": cpu_max})) is None


@pytest.mark.parametrize("where", ["cpu", "cpu,cpuacct", "."])
def test_cgroup_v1_quota_over_period(tmp_path: Path, where: str) -> None:
    root = cgroup(
        tmp_path,
        {f"{where}/cpu.cfs_quota_us": "250000\n", f"{where}/cpu.cfs_period_us": "100000\n"},
    )
    assert cgroup_cpu_limit(root) == 3


def test_cgroup_v1_minus_one_is_unlimited(tmp_path: Path) -> None:
    root = cgroup(tmp_path, {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"})
    assert cgroup_cpu_limit(root) is None


def test_v2_wins_over_v1_files(tmp_path: Path) -> None:
    root = cgroup(
        tmp_path,
        {
            "cpu.max": "100000 100000\n",
            "cpu/cpu.cfs_quota_us": "400000\n",
            "cpu/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_cpu_limit(root) == 1


def test_no_cgroup_files_fall_back_to_the_available_cpus(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(tmp_path) is None
    assert auto_processes(root=tmp_path) == available_cpus() >= 1
    unlimited = cgroup(tmp_path / "v2", {"cpu.max": "max 100000\n"})
    assert auto_processes(root=unlimited) == available_cpus()


def test_the_root_comes_from_the_environment_and_drives_processes_auto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = cgroup(tmp_path, {"cpu.max": "700000 100000\n"})
    assert str(cgroup_root({})) == "/sys/fs/cgroup"
    assert cgroup_root({CGROUP_ROOT_ENV: str(root)}) == root
    monkeypatch.setenv(CGROUP_ROOT_ENV, str(root))
    assert auto_processes() == 7
    assert processes("auto") == processes("AUTO") == 7
    assert processes("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
        processes("0")


def test_own_cgroup_paths_from_proc_self_cgroup() -> None:
    assert own_cgroups(PRIVATE) == ("/", None)
    assert own_cgroups(V2_HOST_VIEW) == ("/kubepods/burstable/pod1/ctr", None)
    assert own_cgroups(V1_HOST_VIEW) == (None, "/kubepods/pod1/ctr")
    # a path that climbs out of the namespace, and garbage, name nothing
    assert own_cgroups("0::/../../x\n2:cpu:/../y\nnonsense\n") == (None, None)
    assert own_cgroups(None) == own_cgroups("") == (None, None)


def test_v2_the_own_cgroup_is_read_when_the_mount_shows_the_host_tree(tmp_path: Path) -> None:
    # no cpu.max at the top (the host's root cgroup has none): the container's own
    root = cgroup(tmp_path, {"kubepods/burstable/pod1/ctr/cpu.max": "300000 100000\n"})
    assert cgroup_cpu_limit(root, self_cgroup=V2_HOST_VIEW) == 3
    assert auto_processes(root=root, self_cgroup=V2_HOST_VIEW) == 3
    # the same directory is not ours in a private namespace: no limit found
    assert cgroup_cpu_limit(root, self_cgroup=PRIVATE) is None


def test_v2_own_cgroup_first_and_the_smallest_limit_on_the_way_up(tmp_path: Path) -> None:
    root = cgroup(
        tmp_path,
        {
            "cpu.max": "max 100000\n",
            "kubepods/cpu.max": "max 100000\n",
            "kubepods/burstable/pod1/cpu.max": "200000 100000\n",  # the pod: 2 CPUs
            "kubepods/burstable/pod1/ctr/cpu.max": "max 100000\n",  # the container: unset
        },
    )
    assert cgroup_cpu_limit(root, self_cgroup=V2_HOST_VIEW) == 2
    (root / "kubepods/burstable/pod1/ctr/cpu.max").write_text("50000 100000\n")
    assert cgroup_cpu_limit(root, self_cgroup=V2_HOST_VIEW) == 1
    # the top's own file wins over nothing when the own path does not exist here
    (root / "cpu.max").write_text("600000 100000\n")
    assert cgroup_cpu_limit(root, self_cgroup="0::/elsewhere/ctr\n") == 6


def test_v1_the_own_cgroup_of_the_cpu_controller_is_read(tmp_path: Path) -> None:
    root = cgroup(
        tmp_path,
        {
            "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            "cpu,cpuacct/kubepods/pod1/ctr/cpu.cfs_quota_us": "150000\n",
            "cpu,cpuacct/kubepods/pod1/ctr/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_cpu_limit(root, self_cgroup=V1_HOST_VIEW) == 2
    # in a private namespace (path /) the top is the own cgroup: unlimited there
    assert cgroup_cpu_limit(root, self_cgroup="3:cpu,cpuacct:/\n") is None


def test_a_hybrid_host_with_no_v2_cpu_files_falls_back_to_v1(tmp_path: Path) -> None:
    # a v2 line in /proc/self/cgroup, but the cpu controller on v1 (hybrid mode)
    root = cgroup(
        tmp_path, {"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}
    )
    assert cgroup_cpu_limit(root, self_cgroup="2:cpu:/\n0::/\n") == 4
