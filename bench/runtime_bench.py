"""Worker-runtime benchmark: taskscale beside RQ, arq, dramatiq, Celery and saq.

Issue 2 asks for drain throughput of pre-enqueued no-ops with 1 and 2 worker
processes, enqueue throughput, and delayed-task lateness at 1k due per
second, every system measured in the same run on the same Redis, medians of
several runs, reported as ratios. This module is the harness; the systems
are in ``bench/peers`` and run in their own virtualenv
(``bash bench/setup_peers.sh``), so this process never imports them.

    .venv/bin/python -m bench.runtime_bench            # 100k tasks, 3 runs
    .venv/bin/python -m bench.runtime_bench --quick    # 10k tasks
    .venv/bin/python -m bench.runtime_bench --table bench/results/runtime.json
    .venv/bin/python -m bench.runtime_bench --replot bench/results/runtime.json [PNG]

Issue 11 (task bodies): ``--body empty,incr,sleep`` drains with each body in
turn, interleaved within every run, at equal concurrency (``--threads`` is
every system's per-process concurrency: threads, async jobs or slots), and
adds the taskscale variants ``taskscale-async`` and ``taskscale-procs``
(``bench.peers.VARIANTS``) when asked for in ``--peers``; tables and plot
come from ``bench.bodies_report``. The drains are what is measured there, so
the queue is loaded by ``--enqueue-procs`` children at once, and after a
system's first run it is loaded with only what its drain window can take
(twice its best rate so far x the window, at most N).

    .venv/bin/python -m bench.runtime_bench --body empty,incr,sleep --workers 2 \
        --threads 16 --ops drain --peers taskscale,taskscale-async,taskscale-procs,...

How each figure is taken (the same way for every system):

* enqueue: a child process enqueues N no-ops through the system's public
  API (its batch API where it has one) with no worker running; the rate is
  N over the time spent in those calls (imports and connecting excluded).
* drain: the N tasks just enqueued are drained by W worker processes
  started with the system's own CLI. Every task body stamps the wall clock
  (``bench.peers.probe``); the rate is tasks done over the time from the
  first task's start to the last task's end, so process start-up is
  excluded. A system still draining ``drain_window`` seconds after its first
  task is measured over the tasks it finished by then (steady state; the
  sample says ``finished_all: false``). Start-up time, spawn-to-done time
  and Redis ``INFO commandstats`` per task are recorded too.
* lateness: W worker processes (the largest W of the drain runs, plus
  taskscale's scheduler process) run; a child schedules ``rate x seconds``
  delayed tasks through the system's native delay mechanism, due evenly
  from a lead time that lets the whole schedule be written before the first
  is due; each task records its start minus its due time. p50 / p99 per run
  (tasks that never ran count as infinitely late), medians over runs.

Redis is one ``redis-server`` started here on a free loopback port, flushed
before every measurement. Every child and worker is bounded in time: a
system that hangs is killed and its sample recorded as failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import redis

from bench.peers import PEERS, VARIANTS
from bench.peers.probe import (
    BODIES,
    BODY_ENV,
    INCR_KEY,
    LATE_KEY,
    PROBE_KEY_PREFIX,
    PROBES_KEY,
    SLOTS_ENV,
    URL_ENV,
)
from taskscale.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.redis_server import RedisServer  # noqa: E402  (tests/ is not a package)

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


# --- processes ---------------------------------------------------------------


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


# --- probes --------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeTotals:
    count: int
    first: float
    last: float


def read_probes(client: redis.Redis) -> ProbeTotals:
    ids = sorted(client.smembers(PROBES_KEY))
    if not ids:
        return ProbeTotals(0, 0.0, 0.0)
    pipe = client.pipeline(transaction=False)
    for probe_id in ids:
        pipe.hgetall(PROBE_KEY_PREFIX + text(probe_id))
    rows = [row for row in pipe.execute() if row]
    firsts = [float(r[b"first"]) for r in rows if float(r[b"first"]) > 0]
    return ProbeTotals(
        count=sum(int(r[b"count"]) for r in rows),
        first=min(firsts, default=0.0),
        last=max((float(r[b"last"]) for r in rows), default=0.0),
    )


def wait_for_count(
    client: redis.Redis,
    target: int,
    *,
    timeout: float,
    procs: Sequence[subprocess.Popen[bytes]],
    window: float | None = None,
    on_first: Any = None,
) -> ProbeTotals:
    """Poll the probes until ``target`` tasks are done, or until ``window``
    seconds after the first task started; PeerFailed on timeout or when a
    worker process exits early. ``on_first(totals)`` is called at the first
    poll that sees a finished task."""
    deadline = time.monotonic() + timeout
    totals = read_probes(client)
    while totals.count < target:
        if on_first is not None and totals.count:
            on_first(totals)
            on_first = None
        if window is not None and totals.first and time.time() - totals.first > window:
            break
        if time.monotonic() > deadline:
            raise PeerFailed(f"timed out after {timeout:.0f} s: {totals.count}/{target} done")
        dead = [str(p.args) for p in procs if p.poll() is not None]
        if dead:
            raise PeerFailed(f"worker exited early ({totals.count}/{target} done): {dead[0]}")
        time.sleep(POLL_INTERVAL)
        totals = read_probes(client)
    time.sleep(0.15)  # let every probe flush its last stamp
    return read_probes(client)


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


def redis_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def cpu_per_task(
    marks: Sequence[tuple[ProbeTotals, float, float]], totals: ProbeTotals, end: float, at: int
) -> float | None:
    """Microseconds of CPU per task between the first mark and the end."""
    if not marks or totals.count <= marks[0][0].count:
        return None
    spent = end - marks[0][at]
    return spent / (totals.count - marks[0][0].count) * 1e6


def read_lateness(client: redis.Redis) -> list[float]:
    values: list[float] = []
    for chunk in client.lrange(LATE_KEY, 0, -1):
        values.extend(json.loads(chunk))
    return values


def redis_commandstats(client: redis.Redis) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {}
    for name, row in client.info("commandstats").items():
        stats[name.removeprefix("cmdstat_")] = {
            "calls": float(row["calls"]),
            "usec": float(row["usec"]),
        }
    return stats


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --- operations ------------------------------------------------------------------


def enqueue_parallel(h: Harness, peer: str, n: int, procs: int) -> dict[str, Any]:
    """Enqueue ``n`` tasks from ``procs`` children at once (issue 11 measures
    drains only; loading the queue faster leaves more time for them)."""
    if procs <= 1:
        return h.child(peer, "enqueue", "--n", str(n), timeout=60 + n / 1000)
    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    with ThreadPoolExecutor(procs) as pool:
        answers = list(
            pool.map(
                lambda k: h.child(peer, "enqueue", "--n", str(k), timeout=60 + n / 1000), shares
            )
        )
    seconds = max(a["seconds"] for a in answers)
    return {"n": n, "seconds": seconds, "rate": n / seconds}


def measure_drain(h: Harness, peer: str, workers: int, run: int) -> list[Sample]:
    """Enqueue N (one enqueue sample), then drain them with W workers."""
    n = h.n_for(peer) if h.settings.bodies else h.settings.n
    h.client.flushall()
    enq = enqueue_parallel(h, peer, n, h.settings.enqueue_procs)
    enqueue_sample = Sample(
        peer, "enqueue", run, True, n=n, rate=enq["rate"], seconds=enq["seconds"]
    )
    enqueue_sample.loadavg = os.getloadavg()
    h.client.config_resetstat()
    commands = worker_commands(h, peer, workers=workers, delayed=False)
    label = f"drain{workers}-{h.body}-r{run}"
    if h.settings.profile_dir is not None:
        h.settings.profile_dir.mkdir(parents=True, exist_ok=True)
        mode = "gil" if h.settings.profile_gil else "all"
        commands = [
            under_profiler(h, argv, h.settings.profile_dir / f"{peer}-{label}-{i}-{mode}.txt")
            for i, argv in enumerate(commands)
        ]
    spawned = time.time()
    with h.workers(peer, commands, label) as procs, profilers(h, procs):
        window = h.settings.drain_window
        timeout = 60 + window
        # CPU the workers (and Redis) spend per task once they run: taken
        # from the first poll that sees a finished task to the end, so
        # start-up (imports) is left out; unlike a rate, not diluted by the
        # other work sharing the machine.
        marks: list[tuple[ProbeTotals, float, float]] = []

        def first(seen: ProbeTotals) -> None:
            marks.append((seen, groups_cpu(procs), redis_cpu(h.client)))

        totals = wait_for_count(
            h.client, n, timeout=timeout, procs=procs, window=window, on_first=first
        )
        cpu_end, redis_end = groups_cpu(procs), redis_cpu(h.client)
        done = time.time()
    seconds = totals.last - totals.first
    stats = redis_commandstats(h.client)
    drain = Sample(peer, "drain", run, True, workers=workers, n=totals.count, body=h.body)
    enqueue_sample.body = h.body
    drain.rate, drain.seconds = totals.count / seconds, seconds
    drain.loadavg = os.getloadavg()
    drain.extra = {
        # a system that did not finish within the window is measured over
        # the tasks it did finish (steady state), and says so
        "finished_all": totals.count >= n,
        "enqueued": n,
        "startup_s": totals.first - spawned,
        "spawn_to_done_s": done - spawned,
        "redis_usec_per_task": sum(s["usec"] for s in stats.values()) / totals.count,
        "redis_calls_per_task": sum(s["calls"] for s in stats.values()) / totals.count,
        "commandstats": stats,
        "worker_cpu_us_per_task": cpu_per_task(marks, totals, cpu_end, 1),
        "redis_cpu_us_per_task": cpu_per_task(marks, totals, redis_end, 2),
        # proof the body ran: one INCR per finished task (incr body)
        "incr_count": int(h.client.get(INCR_KEY) or 0),
    }
    return [enqueue_sample, drain]


def measure_lateness(h: Harness, peer: str, run: int) -> Sample:
    """The most worker processes of the drain runs (so a system whose single
    process can't keep up with the rate gets its best chance); schedule
    rate x seconds delayed tasks; p50/p99 of start minus due."""
    s = h.settings
    count = int(s.late_rate * s.late_seconds)
    lead = 3.0 + count / 800  # the slowest scheduler seen writes ~1k/s on a busy machine
    h.client.flushall()
    workers = max(s.workers)
    commands = worker_commands(h, peer, workers=workers, delayed=True)
    with h.workers(peer, commands, f"late-r{run}") as procs:
        warm = 10
        h.child(peer, "enqueue", "--n", str(warm), timeout=60)
        wait_for_count(h.client, warm, timeout=60, procs=procs)
        time.sleep(1.0)  # let every worker thread / process settle
        sched = h.child(
            peer,
            "schedule",
            "--rate",
            str(s.late_rate),
            "--seconds",
            str(s.late_seconds),
            "--lead",
            str(lead),
            timeout=lead + 60,
        )
        remaining = sched["last_due"] - time.time()
        timeout = max(0.0, remaining) + LATE_GRACE_S
        error = ""
        try:
            wait_for_count(h.client, warm + count, timeout=timeout, procs=procs)
        except PeerFailed as exc:  # fell behind: keep what ran, say how much did not
            error = f"fell behind: {exc}"
    late = read_lateness(h.client)
    sample = Sample(peer, "lateness", run, not error, workers=workers, n=len(late), error=error)
    if peer == "taskscale":  # its own counters split lateness: due -> claim vs claim -> start
        stats = h.client.hgetall(Keys().stats("late"))
        sample.extra["taskscale_stats"] = {text(k): int(v) for k, v in stats.items()}
    sample.loadavg = os.getloadavg()
    # Tasks that never ran count as later than anything measured, so the
    # percentiles of a system that fell behind are lower bounds, not hidden.
    padded = late + [float("inf")] * (count - len(late))
    sample.extra |= {
        "p50_ms": finite_ms(percentile(padded, 50)),
        "p99_ms": finite_ms(percentile(padded, 99)),
        "max_ms": finite_ms(max(padded)),
        "min_ms": finite_ms(min(padded)),
        "ran": len(late),
        "scheduled": count,
        "scheduled_ahead_s": sched["ahead_of_first_due"],
        "schedule_rate": sched["n"] / sched["seconds"],
    }
    if sched["ahead_of_first_due"] < 0:
        sample.ok = False
        sample.error = "the schedule was still being written when the first task was due"
    return sample


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def finite_ms(seconds: float) -> float | None:
    """Seconds as ms, or None for a task that never ran (JSON has no inf)."""
    return None if seconds == float("inf") else seconds * 1000


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


def worker_commands(h: Harness, peer: str, *, workers: int, delayed: bool) -> list[list[str]]:
    """The argv lists a peer module gives for W workers (asked via a child)."""
    answer = h.child(
        peer,
        "commands",
        "--workers",
        str(workers),
        "--threads",
        str(h.settings.threads),
        "--bindir",
        h.bindir,
        *(["--delayed"] if delayed else []),
        timeout=60,
    )
    commands: list[list[str]] = answer["commands"]
    return commands


def guarded(peer: str, op: str, run: int, fn: Any, *args: Any) -> list[Sample]:
    """Run one measurement; a failure becomes a failed sample, not a crash."""
    try:
        result = fn(*args)
    except (PeerFailed, redis.RedisError, KeyError, ValueError, ZeroDivisionError) as exc:
        print(f"  {peer} {op} run {run}: FAILED: {exc}", file=sys.stderr)
        return [Sample(peer, op, run, False, error=str(exc), loadavg=os.getloadavg())]
    return result if isinstance(result, list) else [result]


def run_all(h: Harness) -> list[Sample]:
    """Every run, every system interleaved, so machine noise spreads evenly."""
    s = h.settings
    samples: list[Sample] = []
    for run in range(1, s.runs + 1):
        for body, peer in [(b, p) for b in s.bodies or ("empty",) for p in s.peers]:
            h.body = body
            if "drain" in s.ops:
                for w in s.workers:
                    got = guarded(peer, f"drain{w}", run, measure_drain, h, peer, w, run)
                    for sample in got:
                        sample.body = body
                        if sample.ok and sample.op == "drain":
                            key = (peer, body)
                            h.seen[key] = max(h.seen.get(key, 0.0), sample.rate)
                        if not sample.ok:
                            sample.workers = w
                    samples += got
                    report_progress(got)
            if "lateness" in s.ops and body == (s.bodies or ("empty",))[0]:
                got = guarded(peer, "lateness", run, measure_lateness, h, peer, run)
                samples += got
                report_progress(got)
    return samples


def report_progress(samples: Sequence[Sample]) -> None:
    for x in samples:
        if not x.ok:
            continue
        what = f"{x.op}{x.workers if x.op == 'drain' else ''}"
        what += f" {x.body}" if x.body != "empty" or x.op == "drain" else ""
        if x.op == "lateness":
            figure = f"p50 {x.extra['p50_ms']:.1f} ms  p99 {x.extra['p99_ms']:.1f} ms"
        else:
            figure = f"{x.rate:,.0f} tasks/s"
        load = "/".join(f"{v:.1f}" for v in x.loadavg)
        print(f"  run {x.run} {x.peer:15} {what:14} {figure}   (load {load})", flush=True)


# --- summary ---------------------------------------------------------------------


METRICS: tuple[tuple[str, str, bool], ...] = (
    ("enqueue", "enqueue tasks/s", True),
    ("drain1", "drain 1 proc tasks/s", True),
    ("drain2", "drain 2 procs tasks/s", True),
    ("p50_ms", "lateness p50 ms", False),
    ("p99_ms", "lateness p99 ms", False),
)
"""(key, label, higher is better) of every reported figure."""


def metric_values(samples: Sequence[Sample], peer: str, key: str) -> list[float]:
    mine = [x for x in samples if x.peer == peer and x.ok]
    if key == "enqueue":
        return [x.rate for x in mine if x.op == "enqueue"]
    if key.startswith("drain"):
        w = int(key.removeprefix("drain"))
        return [x.rate for x in mine if x.op == "drain" and x.workers == w]
    # Lateness: every run whose schedule was written in time counts; a run
    # in which some tasks never ran counts as infinitely late at the
    # percentiles those tasks reach (dropping it would flatter the system).
    late = [x for x in samples if x.peer == peer and x.op == "lateness" and x.extra]
    valid = [x for x in late if x.extra["scheduled_ahead_s"] >= 0]
    return [INF if x.extra[key] is None else float(x.extra[key]) for x in valid]


INF = float("inf")


def finite_or_none(value: float) -> float | None:
    return None if value == INF else value


def summarize(samples: Sequence[Sample], peers: Sequence[str]) -> dict[str, Any]:
    """Medians per system and metric, and taskscale's ratio to the best peer."""
    medians: dict[str, dict[str, float | None]] = {}
    for peer in peers:
        medians[peer] = {}
        for key, _, _ in METRICS:
            values = metric_values(samples, peer, key)
            medians[peer][key] = finite_or_none(statistics.median(values)) if values else None
    ratios: dict[str, dict[str, Any]] = {}
    for key, _, higher in METRICS:
        others = [(p, medians[p][key]) for p in peers if p != "taskscale"]
        others_ok = [(p, v) for p, v in others if v is not None]
        ours = medians.get("taskscale", {}).get(key)
        if not others_ok or ours is None:
            continue
        best_peer, best = (max if higher else min)(others_ok, key=lambda pv: pv[1])
        ratio = ours / best if higher else best / ours if ours > 0 else None
        ratios[key] = {"best_peer": best_peer, "best_peer_value": best, "ratio": ratio}
    return {"medians": medians, "ratios": ratios}


def print_table(summary: dict[str, Any], peers: Sequence[str]) -> None:
    medians = summary["medians"]
    header = f"{'system':10}" + "".join(f"{label:>24}" for _, label, _ in METRICS)
    print(header)
    for peer in peers:
        cells = []
        for key, _, _ in METRICS:
            value = medians[peer][key]
            cells.append(f"{'failed':>24}" if value is None else f"{value:>24,.1f}")
        print(f"{peer:10}" + "".join(cells))
    print()
    for key, label, higher in METRICS:
        r = summary["ratios"].get(key)
        if r is None or r["ratio"] is None:
            continue
        how = "x the fastest peer" if higher else "x lower than the best peer"
        print(f"{label:24} taskscale {r['ratio']:.2f} {how} ({r['best_peer']})")


def markdown_table(result: dict[str, Any]) -> str:
    """The docs table of a results file: medians, [min-max] over runs, and
    the ratio row, so docs/benchmarks.md never retypes a number."""
    peers = list(result["summary"]["medians"])
    samples = [Sample(**{**x, "loadavg": tuple(x["loadavg"])}) for x in result["samples"]]
    summary = summarize(samples, peers)
    lines = ["| system | " + " | ".join(label for _, label, _ in METRICS) + " |"]
    lines.append("|---" * (len(METRICS) + 1) + "|")
    for peer in peers:
        cells = []
        for key, _, _ in METRICS:
            values = metric_values(samples, peer, key)
            if not values:
                cells.append(fell_behind_cell(samples, peer, key))
                continue
            median = statistics.median(values)
            spread = f"{number(min(values))}-{number(max(values))}"
            shown = number(median)
            cells.append(
                f"**{shown}** ({spread})" if peer == "taskscale" else f"{shown} ({spread})"
            )
        lines.append(f"| {peer} | " + " | ".join(cells) + " |")
    ratio_cells = []
    for key, _, higher in METRICS:
        r = summary["ratios"].get(key)
        if r is None or r["ratio"] is None:
            ratio_cells.append("-")
        else:
            word = "faster" if higher else "lower"
            ratio_cells.append(f"{r['ratio']:.1f}x {word} than {r['best_peer']}")
    lines.append("| taskscale vs best peer | " + " | ".join(ratio_cells) + " |")
    return "\n".join(lines)


def number(value: float) -> str:
    if value == INF:
        return "never"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def fell_behind_cell(samples: Sequence[Sample], peer: str, key: str) -> str:
    """Table cell for a metric with no valid sample: a lateness lower bound
    when the system fell behind the schedule, else 'failed'."""
    op = "lateness" if key.endswith("_ms") else "drain" if key.startswith("drain") else key
    if not any(x.peer == peer and x.op == op for x in samples):
        return "-"
    behind = [x for x in samples if x.peer == peer and x.op == "lateness" and x.extra]
    if op != "lateness" or not behind:
        return "failed"
    ran = statistics.median(x.extra["ran"] / x.extra["scheduled"] for x in behind)
    bounds = [x.extra[key] for x in behind if x.extra[key] is not None]
    if len(bounds) == len(behind):
        return f">= {statistics.median(bounds):,.0f} (fell behind, {ran:.0%} ran)"
    return f"> {LATE_GRACE_S * 1000:,.0f} after the last due ({ran:.0%} ran)"


#: Issue 2's targets, drawn on the plot: 20k tasks/s drained by 2 processes,
#: p99 lateness at most 5 ms.
GOALS = {"drain2": 20_000.0, "p99_ms": 5.0}


def plot(summary: dict[str, Any], peers: Sequence[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = summary["medians"]
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.2))
    colors = ["#d62728" if p == "taskscale" else "#7f7f7f" for p in peers]
    panels = (
        ("enqueue", "enqueue (tasks/s)", False),
        ("drain1", "drain, 1 worker process (tasks/s)", False),
        ("drain2", "drain, 2 worker processes (tasks/s)", False),
        ("p99_ms", "delayed-task lateness p99 (ms, log)", True),
    )
    for ax, (key, label, log) in zip(axes, panels, strict=True):
        values = [medians[p][key] or 0.0 for p in peers]
        bars = ax.bar(peers, values, color=colors)
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", labelrotation=35, labelsize=9)
        if log:
            ax.set_yscale("log")
        if key in GOALS:
            ax.axhline(GOALS[key], color="#1f77b4", linestyle="--", linewidth=1)
            ax.annotate(
                "issue 2 goal",
                (0.98, GOALS[key]),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=8,
                color="#1f77b4",
            )
        for bar, value in zip(bars, values, strict=True):
            missing = "fell behind" if log else "failed"
            x = bar.get_x() + bar.get_width() / 2
            if value == 0:  # nothing to draw: say why, at the foot of the axis
                ax.annotate(
                    missing,
                    (x, 0.02),
                    xycoords=("data", "axes fraction"),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                    rotation=90,
                )
                continue
            text = f"{value:,.0f}" if value >= 10 else f"{value:.1f}"
            ax.annotate(text, (x, bar.get_height()), ha="center", va="bottom", fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replot(result: dict[str, Any], path: Path) -> None:
    """Draw the plot of a results file again (medians recomputed from samples)."""
    samples = [Sample(**{**x, "loadavg": tuple(x["loadavg"])}) for x in result["samples"]]
    peers = list(result["summary"]["medians"])
    plot(summarize(samples, peers), peers, path, plot_title(result["meta"]["settings"]))


def plot_title(settings: dict[str, str]) -> str:
    return (
        f"{int(settings['n']):,} no-op tasks, {settings['threads']} threads/process, medians of "
        f"{settings['runs']} runs; lateness at {float(settings['late_rate']):,.0f}/s "
        f"({os.cpu_count()} shared cores)"
    )


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


# --- entry point ------------------------------------------------------------------


def seeded_rates(path: Path) -> dict[tuple[str, str], float]:
    """Best drain rate per (system, body) in an earlier results file."""
    seen: dict[tuple[str, str], float] = {}
    for x in json.loads(path.read_text())["samples"]:
        if x["ok"] and x["op"] == "drain":
            key = (x["peer"], x.get("body", "empty"))
            seen[key] = max(seen.get(key, 0.0), x["rate"])
    return seen


def describe_peers(h: Harness) -> dict[str, Any]:
    """Each system's version and APIs; a variant the installed code can't
    run is dropped from the peers, with a note saying why."""
    described = {}
    for peer in h.settings.peers:
        answer = h.child(peer, "version", "--bindir", h.bindir, timeout=120)
        if answer.get("skip"):
            print(f"  note: {peer} skipped: {answer['skip']}", file=sys.stderr)
        described[peer] = answer
    return described


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": os.getloadavg(),
    }


def parse_args(argv: Sequence[str] | None) -> BenchSettings:
    p = argparse.ArgumentParser(
        prog="python -m bench.runtime_bench", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="10k tasks, 5 s of delayed tasks")
    p.add_argument("--n", type=int, help="tasks per drain run (default 100000)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=8, help="threads per worker process")
    p.add_argument("--workers", default="1,2", help="worker process counts to drain with")
    p.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"systems, in order (variants: {', '.join(VARIANTS)})",
    )
    p.add_argument(
        "--body",
        default="",
        help="issue 11: task bodies to drain with, interleaved (empty,incr,sleep)",
    )
    p.add_argument("--ops", default="drain,lateness")
    p.add_argument("--late-rate", type=float, default=1000.0)
    p.add_argument("--late-seconds", type=float)
    p.add_argument(
        "--seed-rates",
        type=Path,
        help="issue 11: a results file whose drain rates size the first run's queues",
    )
    p.add_argument("--enqueue-procs", type=int, default=1, help="children enqueuing at once")
    p.add_argument("--drain-window", type=float, default=30.0, help="longest drain, seconds")
    p.add_argument("--profile", type=Path, help="py-spy the drain workers; stacks go here")
    p.add_argument("--profile-gil", action="store_true", help="only samples holding the GIL")
    p.add_argument("--peer-venv", type=Path, default=DEFAULT_PEER_VENV)
    p.add_argument("--out", type=Path)
    p.add_argument("--plot", type=Path)
    a = p.parse_args(argv)
    bad = [b for b in a.body.split(",") if b and b not in BODIES]
    if bad:
        p.error(f"--body {','.join(bad)}: choose from {', '.join(BODIES)}")
    base = BenchSettings()
    suffix = ("-bodies" if a.body else "") + ("-quick" if a.quick else "")
    return replace(
        base,
        n=a.n or (10_000 if a.quick else base.n),
        runs=a.runs,
        threads=a.threads,
        workers=tuple(int(w) for w in a.workers.split(",")),
        peers=tuple(x for x in a.peers.split(",") if x),
        ops=tuple(x for x in a.ops.split(",") if x),
        late_rate=a.late_rate,
        drain_window=a.drain_window,
        profile_dir=a.profile,
        profile_gil=a.profile_gil,
        late_seconds=a.late_seconds or (5.0 if a.quick else base.late_seconds),
        peer_venv=a.peer_venv,
        bodies=tuple(x for x in a.body.split(",") if x),
        enqueue_procs=a.enqueue_procs,
        seed_rates=a.seed_rates,
        out=a.out or ROOT / "bench" / "results" / f"runtime{suffix}.json",
        plot=a.plot or ROOT / "docs" / "img" / f"runtime{suffix}.png",
    )


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("--table", "--replot"):
        result = json.loads(Path(argv[1]).read_text())
        if result["meta"]["settings"].get("bodies", "()") != "()":
            from bench import bodies_report

            return bodies_report.offline(argv[0], result, argv[2:])
        if argv[0] == "--table":
            print(markdown_table(result))
        else:
            replot(result, Path(argv[2]) if len(argv) > 2 else BenchSettings().plot)
        return 0
    settings = parse_args(argv)
    if not (settings.peer_venv / "bin" / "python").exists():
        print(
            f"no peer venv at {settings.peer_venv}: run bash bench/setup_peers.sh", file=sys.stderr
        )
        return 2
    started = time.time()
    logs = Path(tempfile.mkdtemp(prefix="taskscale-bench-logs-"))
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        h = Harness(settings, server.url, client, logs)
        if settings.seed_rates is not None:
            h.seen = seeded_rates(settings.seed_rates)
        meta: dict[str, Any] = {
            "settings": {k: str(v) for k, v in asdict(settings).items()},
            "machine": machine(),
        }
        meta["redis"] = client.info("server")["redis_version"]
        meta["peers"] = describe_peers(h)
        skipped = {p for p, d in meta["peers"].items() if d.get("skip")}
        settings = replace(settings, peers=tuple(p for p in settings.peers if p not in skipped))
        h.settings = settings
        samples = run_all(h)
        client.close()
    meta["loadavg_at_end"] = os.getloadavg()
    meta["duration_s"] = time.time() - started
    if settings.bodies:
        from bench import bodies_report

        return bodies_report.finish(meta, samples, settings, logs)
    summary = summarize(samples, settings.peers)
    result = {"meta": meta, "summary": summary, "samples": [asdict(x) for x in samples]}
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print_table(summary, settings.peers)
    plot(summary, settings.peers, settings.plot, plot_title(meta["settings"]))
    if settings.profile_dir is not None:
        print_profiles(settings.profile_dir)
    print(f"\nwrote {settings.out} and {settings.plot}; worker logs in {logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
