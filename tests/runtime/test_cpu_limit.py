"""``--processes auto``: the CPU limit read from cgroup files, on fixture
directories standing in for /sys/fs/cgroup."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from taskscale.cli_runtime import processes
from taskscale.cpu_limit import (
    CGROUP_ROOT_ENV,
    auto_processes,
    available_cpus,
    cgroup_cpu_limit,
    cgroup_root,
)


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
