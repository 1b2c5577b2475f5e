"""The runtime benchmark's CPU accounting counts every process a worker
command starts, also children in process groups of their own (a
``taskscale worker --processes P`` supervisor's), and stops them all."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.runtime_procs import family, groups_cpu, stop_groups
from support.waiting import wait_until

#: A parent that starts a child in a session (so a process group) of its own;
#: the child burns CPU until killed, the parent sleeps.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c", "while True: pass"], start_new_session=True
)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_cpu_of_a_child_in_its_own_process_group_is_counted_and_it_is_stopped() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert child in family([parent])
        before = groups_cpu([parent])
        wait_until(lambda: groups_cpu([parent]) - before > 0.3, timeout=60)
        # the parent alone sleeps: nearly all of it is the child's
        own = sum(int(x) for x in _stat(parent.pid)[11:13]) / os.sysconf("SC_CLK_TCK")
        assert groups_cpu([parent]) - own > 0.3
    finally:
        stop_groups([parent], grace=1.0)
        parent.stdout.close()  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False
