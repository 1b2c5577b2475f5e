"""py-spy on the runtime benchmark's drain workers (``--profile``): each worker
launched under ``py-spy record``, stopped so it writes its stacks, and the
stacks summarized by worker thread role and by function."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from bench.runtime_procs import Harness, signal_group


def under_profiler(h: Harness, argv: list[str], path: Path) -> list[str]:
    """``argv`` run under ``py-spy record`` (raw collapsed stacks to ``path``).
    py-spy's attach mode can't read this sandbox's processes; launch mode can."""
    spy = [f"{h.bindir}/py-spy", "record", "-f", "raw", "-r", "200", "--nonblocking"]
    spy += ["-d", str(int(h.settings.drain_window + 120)), "-o", str(path)]
    if h.settings.profile_gil:
        spy.append("--gil")
    return [*spy, "--", *argv]


@contextmanager
def profilers(h: Harness, procs: Sequence[subprocess.Popen[bytes]]) -> Iterator[None]:
    """When profiling, end with SIGINT to every group: py-spy writes its
    stacks on SIGINT (not on SIGTERM) and the worker stops gracefully."""
    try:
        yield
    finally:
        if h.settings.profile_dir is not None:
            for proc in procs:
                signal_group(proc, signal.SIGINT)
            for proc in procs:
                with suppress(subprocess.TimeoutExpired):
                    proc.wait(20)


def summarize_profile(path: Path, top: int = 12) -> dict[str, Any]:
    """Share of samples per worker thread role and per leaf function, from a
    py-spy ``raw`` (collapsed stacks) file."""
    roles: dict[str, int] = {}
    leaves: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        names = [f.split(" (")[0].rsplit(".", 1)[-1] for f in frames]
        role = next((r for r in THREAD_ROLES if r in names), "other")
        roles[role] = roles.get(role, 0) + count
        leaf = frames[-1]
        leaves[leaf] = leaves.get(leaf, 0) + count
        for name in {f.split(" (")[0] for f in frames if "taskscale/" in f}:
            inclusive[name] = inclusive.get(name, 0) + count
    ranked = sorted(leaves.items(), key=lambda kv: -kv[1])[:top]
    ranked_incl = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    return {
        "samples": total,
        "roles": {k: v / total for k, v in sorted(roles.items(), key=lambda kv: -kv[1])},
        "leaves": [(name, n / total) for name, n in ranked],
        "inclusive": [(name, n / total) for name, n in ranked_incl],
    }


#: Worker thread entry functions (taskscale.worker and its parts), for the summary.
THREAD_ROLES = ("claim_loop", "_claimer", "_executor", "_reporter", "_flush_forever", "run")


def print_profiles(directory: Path) -> None:
    for path in sorted(directory.glob("*.txt")):
        if path.stat().st_size == 0:
            continue
        summary = summarize_profile(path)
        print(f"\n{path.name}: {summary['samples']} samples")
        print("  by thread: " + ", ".join(f"{k} {v:.0%}" for k, v in summary["roles"].items()))
        print("  self (leaf) time:")
        for name, share in summary["leaves"]:
            print(f"  {share:6.1%}  {name}")
        print("  inclusive time in taskscale functions:")
        for name, share in summary["inclusive"]:
            print(f"  {share:6.1%}  {name}")
