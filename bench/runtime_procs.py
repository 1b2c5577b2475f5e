"""The runtime benchmark's processes: the ``Harness`` (the Redis server, the
peers' interpreter, children that answer one JSON line, worker processes in
groups of their own) and the accounting of process groups -- every
descendant, its CPU, and stopping them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench.peers.probe import BODY_ENV, SLOTS_ENV, URL_ENV
from bench.runtime_settings import ROOT, BenchSettings, PeerFailed


@dataclass
class Harness:
    """The Redis server, the peer interpreter and where worker logs go."""

    settings: BenchSettings
    url: str
    client: redis.Redis
    logdir: Path
    body: str = "empty"
    #: Best drain rate seen per (system, body): later runs enqueue only what
    #: the drain window can take (twice that), not N tasks never run.
    seen: dict[tuple[str, str], float] = field(default_factory=dict)

    def n_for(self, peer: str) -> int:
        rate = self.seen.get((peer, self.body))
        if rate is None:
            return self.settings.n
        return min(self.settings.n, max(2000, int(2 * rate * self.settings.drain_window)))

    @property
    def python(self) -> str:
        return str(self.settings.peer_venv / "bin" / "python")

    @property
    def bindir(self) -> str:
        return str(self.settings.peer_venv / "bin")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env[URL_ENV] = self.url
        env["PYTHONPATH"] = str(ROOT)
        env["PYTHONUNBUFFERED"] = "1"
        env[BODY_ENV] = self.body
        if self.settings.bodies:  # issue 11: every system at the same concurrency
            env[SLOTS_ENV] = str(self.settings.threads)
        env.pop("VIRTUAL_ENV", None)
        return env

    def child(self, peer: str, op: str, *args: str, timeout: float) -> dict[str, Any]:
        """Run ``bench.peers.run PEER OP`` and return its JSON line."""
        argv = [self.python, "-m", "bench.peers.run", peer, op, *args]
        try:
            done = subprocess.run(
                argv,
                cwd=ROOT,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PeerFailed(f"{peer} {op}: no answer within {timeout:.0f} s") from None
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-3:]
            raise PeerFailed(f"{peer} {op}: exit {done.returncode}: {' | '.join(tail)}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    @contextmanager
    def workers(
        self, peer: str, commands: list[list[str]], label: str
    ) -> Iterator[list[subprocess.Popen[bytes]]]:
        """Start each command in its own process group; always stop them."""
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for index, argv in enumerate(commands):
                log = open(self.logdir / f"{peer}-{label}-{index}.log", "wb")  # noqa: SIM115
                procs.append(
                    subprocess.Popen(
                        argv,
                        cwd=ROOT,
                        env=self.env(),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
                log.close()
            yield procs
        finally:
            stop_groups(procs)
        for proc in procs:
            if proc.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL, 143, 1):
                print(f"  note: {peer} worker exited {proc.returncode}", file=sys.stderr)


def stop_groups(procs: Sequence[subprocess.Popen[bytes]], grace: float = 8.0) -> None:
    """SIGTERM every process group, then SIGKILL what is left after ``grace``
    (descendants in groups of their own too: a supervisor's children)."""
    roots = {proc.pid for proc in procs}
    descendants = {pid: f[19] for pid, f in family(procs).items() if pid not in roots}
    for proc in procs:
        signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        with suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.1, deadline - time.monotonic()))
    for proc in procs:
        signal_group(proc, signal.SIGKILL)  # children of a dead leader too
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            print(f"  warning: pid {proc.pid} did not die", file=sys.stderr)
    alive = _proc_stats()
    for pid, started in descendants.items():  # still the same process (start time)?
        if pid in alive and alive[pid][19] == started:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _proc_stats() -> dict[int, list[str]]:
    """pid -> the fields of ``/proc/PID/stat`` after the command name."""
    found: dict[int, list[str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            found[int(stat.parent.name)] = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def family(procs: Sequence[subprocess.Popen[bytes]]) -> dict[int, list[str]]:
    """The live processes of ``procs``: every process in their process groups
    and every descendant (a ``taskscale worker --processes P`` supervisor
    starts its children in process groups of their own), pid -> stat fields."""
    stats = _proc_stats()
    roots = {proc.pid for proc in procs}
    counted = {pid for pid, f in stats.items() if int(f[2]) in roots}  # pgrp
    children: dict[int, list[int]] = {}
    for pid, f in stats.items():
        children.setdefault(int(f[1]), []).append(pid)  # ppid
    todo = [pid for pid in roots | counted if pid in stats]
    while todo:
        pid = todo.pop()
        counted.add(pid)
        todo += [c for c in children.get(pid, ()) if c not in counted]
    return {pid: stats[pid] for pid in counted}


def groups_cpu(procs: Sequence[subprocess.Popen[bytes]]) -> float:
    """CPU seconds (user + system) of ``procs`` and everything they started
    (:func:`family`), plus what their exited children spent (cutime and
    cstime: counted once a child is reaped, while it no longer counts itself)."""
    ticks = 0
    for f in family(procs).values():
        ticks += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return ticks / os.sysconf("SC_CLK_TCK")
