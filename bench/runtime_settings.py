"""The runtime benchmark's vocabulary: what a run measures (``BenchSettings``,
one field per flag), one measurement (``Sample``), a peer that failed, and the
constants the harness, the measurements and the reports share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers import PEERS

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PEER_VENV = Path.home() / ".cache" / "taskscale" / "bench-venv"
POLL_INTERVAL = 0.02
#: A delayed task not run this long after the last due time counts as never run.
LATE_GRACE_S = 60.0


@dataclass(frozen=True)
class BenchSettings:
    """What to run; every field has a command-line flag."""

    n: int = 100_000
    runs: int = 3
    workers: tuple[int, ...] = (1, 2)
    threads: int = 8
    peers: tuple[str, ...] = PEERS
    ops: tuple[str, ...] = ("drain", "lateness")
    late_rate: float = 1000.0
    late_seconds: float = 10.0
    #: Longest drain measured, from the first task's start: a system that
    #: has not finished N by then is measured over what it finished.
    drain_window: float = 30.0
    #: When set, py-spy samples every worker process during drain runs and
    #: the collapsed stacks and their summary are written here.
    profile_dir: Path | None = None
    #: Profile only samples holding the GIL (py-spy --gil).
    profile_gil: bool = False
    peer_venv: Path = DEFAULT_PEER_VENV
    out: Path = ROOT / "bench" / "results" / "runtime.json"
    plot: Path = ROOT / "docs" / "img" / "runtime.png"
    #: Task bodies to drain with (issue 11); empty = issue 2's no-op runs.
    bodies: tuple[str, ...] = ()
    #: Children that enqueue at once before a drain (1: issue 2's enqueue figure).
    enqueue_procs: int = 1
    #: A results file whose drain rates size the queues of the first run too.
    seed_rates: Path | None = None


@dataclass
class Sample:
    """One measurement of one system; ``ok`` false means it failed or hung."""

    peer: str
    op: str
    run: int
    ok: bool
    workers: int = 0
    n: int = 0
    rate: float = 0.0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    body: str = "empty"


class PeerFailed(RuntimeError):
    """A child or worker failed or ran past its time bound."""


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def finite_ms(seconds: float) -> float | None:
    """Seconds as ms, or None for a task that never ran (JSON has no inf)."""
    return None if seconds == float("inf") else seconds * 1000
