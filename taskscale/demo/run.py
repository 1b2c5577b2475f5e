"""``taskscale demo``: the whole autoscaler on one machine, in about a minute.

Why it exists: the README's first command must show what taskscale does --
workers appear when work arrives (from zero, woken by the demand signal,
not a poll), follow a bursty load, warm up *before* a spike of delayed tasks
falls due (look-ahead: no peer can see the schedule), and go back to zero
once every type has been idle past its threshold -- with nothing to install
but Redis and nothing left running afterwards.

It wires the real parts together, unchanged: a ``redis-server`` of its own
(:mod:`~taskscale.demo.localredis`, or ``--redis-url``), the
scheduler that promotes delayed tasks, the :class:`Reconciler` with the
:class:`LocalPool` actuator (``taskscale worker`` subprocesses), and a load
generator using the producer API.  A console reporter keeps the latest pass;
the main thread prints a table row per second, and at the end writes a PNG
(load, queue, active, replicas over time) and a summary computed from what
was measured.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import logging
import math
import os
import secrets
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from taskscale.connection import ConnectionSettings, RedisTooOld, check, connect
from taskscale.controller.local import LocalPool, LocalPoolSettings
from taskscale.controller.local_run import LocalScaler, start_local_reconciler
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.reconciler import Reconciler, ReconcilerSettings
from taskscale.demo.first_task import TaskStarts, first_task_after
from taskscale.demo.load import (
    EXAMPLES_MODULE,
    TASK_TYPE,
    Arrivals,
    Burst,
    DemoSettings,
    LoadGenerator,
    LoadPlan,
    Spike,
    add_demo_arguments,
    plan_load,
    settings_from_args,
)
from taskscale.demo.localredis import LocalRedis
from taskscale.demo.plot import plot, write_plot
from taskscale.demo.report import (
    ConsoleReporter,
    RunResult,
    Sample,
    ScaleEvent,
    replica_seconds,
    sample,
    summary,
)
from taskscale.demo.table import Table, reason_text
from taskscale.keys import Keys
from taskscale.logs import configure_logging
from taskscale.producer import Producer
from taskscale.redis_urls import RedisClient
from taskscale.scheduling.scheduler import Scheduler
from taskscale.signals import STOP_SIGNALS, on_stop_signals

__all__ = [
    "Arrivals",
    "Burst",
    "ConsoleReporter",
    "DemoSettings",
    "LoadGenerator",
    "LoadPlan",
    "RunResult",
    "Sample",
    "ScaleEvent",
    "Spike",
    "Table",
    "add_demo_arguments",
    "plan_load",
    "plot",
    "reason_text",
    "replica_seconds",
    "run",
    "run_demo",
    "sample",
    "scale_ups_from_zero",
    "settings_from_args",
    "summary",
]

log = logging.getLogger("taskscale.demo")

# --- the run ------------------------------------------------------------------------------------


def add_parser(subparsers: Any) -> None:
    """Add ``demo`` to the ``taskscale`` CLI."""
    p = subparsers.add_parser(
        "demo", help="scale local worker processes from a local Redis, on this machine"
    )
    add_demo_arguments(p)
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """The ``taskscale demo`` command."""
    configure_logging(args)  # --log-level (default warning) and --log-format
    try:
        settings = settings_from_args(args)
        plan = plan_load(settings)
    except ValueError as exc:
        print(f"taskscale demo: {exc}", file=sys.stderr)
        return 2
    with _stop_signals() as stop:
        try:
            result = run(settings, plan, stop)
        except KeyboardInterrupt:  # while starting or stopping: everything is stopped
            print("taskscale demo: interrupted", file=sys.stderr)
            return 130
        except RedisTooOld as exc:
            print(f"taskscale demo: {exc}", file=sys.stderr)
            return 2
        except (RuntimeError, redis.RedisError) as exc:
            print(f"taskscale demo: {exc}", file=sys.stderr)
            return 1
    write_plot(result, plan, settings)
    print()
    print(summary(result, plan, settings))
    return 130 if result.interrupted else 0


def run(settings: DemoSettings, plan: LoadPlan, stop: threading.Event | None = None) -> RunResult:
    """Start everything, drive the table until the duration is over or
    ``stop`` is set (Ctrl-C), stop everything (in reverse order), and return
    what was measured."""
    with contextlib.ExitStack() as stack:
        url = settings.redis_url or stack.enter_context(LocalRedis()).url
        log_dir = settings.log_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        client = connect(ConnectionSettings(url, socket_timeout_s=5.0, client_retries=True))
        stack.callback(client.close)
        check(client)  # reachable, and new enough for the scripts
        keys = Keys(settings.namespace)
        completed_before = _completed(client, keys)
        pool = LocalPool(_pool_settings(settings, url, log_dir))
        stack.callback(pool.stop_all, 15.0)
        _start_scheduler(stack, client, keys)
        reporter = ConsoleReporter()
        reconciler = _start_reconciler(stack, settings, pool, reporter)
        console = _start_dashboard(stack, settings, url)
        print(_banner(settings, url, log_dir) + console, flush=True)
        generator = LoadGenerator(Producer(client, keys=keys), plan, settings)
        starts = TaskStarts(client, keys, TASK_TYPE)
        starts.start()
        stack.callback(starts.stop)
        t0 = time.monotonic()
        generator.start(t0)
        stack.callback(generator.stop)
        samples, interrupted = _drive(settings, generator, reporter, pool, t0, stop)
        final = pool.current_replicas()
        generator.stop()
        reconciler.close()
        pool.stop_all(15.0)
        starts.stop()
        completed = _completed(client, keys) - completed_before
        reactions, lookahead = scale_ups_from_zero(reporter.events, generator.arrivals, t0)
        return RunResult(
            samples, generator.arrivals, completed, final, len(reporter.events),
            reactions, lookahead, interrupted, log_dir,
            from_zero=_first_tasks(reporter.events, generator.arrivals, starts.starts, t0),
        )  # fmt: skip


def _first_tasks(
    events: list[ScaleEvent], arrivals: Arrivals, starts: list[float], t0: float
) -> list[tuple[float, float | None]]:
    """(decision, first task started) in run seconds, per scale-up from zero
    for ready work (a look-ahead start has no task to run yet)."""
    decisions = [at + t0 for at in _reaction_decisions(events, arrivals, t0)]
    firsts = first_task_after(decisions, starts)
    return [(d - t0, None if f is None else f - t0) for d, f in zip(decisions, firsts, strict=True)]


def scale_ups_from_zero(
    events: list[ScaleEvent], arrivals: Arrivals, t0: float
) -> tuple[list[float], int]:
    """(reaction times of demand-driven scale-ups from zero, look-ahead starts)."""
    starts = _from_zero(events, arrivals, t0)
    reactions = [at - first for at, first in starts if first is not None]
    return reactions, sum(1 for _, first in starts if first is None)


def _reaction_decisions(events: list[ScaleEvent], arrivals: Arrivals, t0: float) -> list[float]:
    """Run seconds of the scale-ups from zero that new ready work caused."""
    return [at for at, first in _from_zero(events, arrivals, t0) if first is not None]


def _from_zero(
    events: list[ScaleEvent], arrivals: Arrivals, t0: float
) -> list[tuple[float, float | None]]:
    """(scale-up at, first ready arrival while at zero -- None for a look-ahead start)."""
    ready = sorted(at for at, _ in arrivals.ready)
    found: list[tuple[float, float | None]] = []
    zero_since = 0.0
    for e in events:
        at = e.at - t0
        if e.after == 0:
            zero_since = at
        elif e.before == 0:
            waiting = [t for t in ready if zero_since <= t <= at]
            # nothing ready arrived: only delayed work within the lead (capped or not)
            found.append((at, waiting[0] if waiting else None))
    return found


def _pool_settings(settings: DemoSettings, url: str, log_dir: Path) -> LocalPoolSettings:
    return LocalPoolSettings(
        types=(TASK_TYPE,),
        redis_url=url,
        namespace=settings.namespace,
        threads=settings.threads,
        imports=(EXAMPLES_MODULE,),
        extra_args=("--grace", "10", "--heartbeat", "1", "--log-format", settings.log_format),
        log_dir=log_dir,
        name_prefix=f"demo-{os.getpid()}",
    )


def _start_scheduler(stack: contextlib.ExitStack, client: RedisClient, keys: Keys) -> None:
    scheduler = Scheduler(client, keys=keys)
    thread = threading.Thread(target=scheduler.run, name="demo-scheduler", daemon=True)
    thread.start()

    def stop() -> None:
        scheduler.stop()
        thread.join(10)

    stack.callback(stop)


def _start_reconciler(
    stack: contextlib.ExitStack,
    settings: DemoSettings,
    pool: LocalPool,
    reporter: ConsoleReporter,
) -> Reconciler:
    scaler = LocalScaler(
        pool.settings, settings.policy(), name="demo", poll_interval_s=settings.poll_interval_s
    )
    # the dashboard's scaling timeline too (DecisionLog), as on one VM
    local = start_local_reconciler(
        scaler, pool, reporter=reporter, settings=ReconcilerSettings(max_sleep_s=0.5)
    )
    stack.callback(local.close)
    reconciler = local.reconciler
    thread = threading.Thread(target=reconciler.run, name="demo-reconciler", daemon=True)
    thread.start()
    stack.callback(thread.join, 10)
    if not reconciler.wait_listening(10):
        log.warning("the demand listener did not subscribe; scale-from-zero waits for a poll")
    return reconciler


def _drive(
    settings: DemoSettings,
    generator: LoadGenerator,
    reporter: ConsoleReporter,
    pool: LocalPool,
    t0: float,
    stop: threading.Event | None,
) -> tuple[list[Sample], bool]:
    """One table row per second until the duration is over; ``stop`` ends it early."""
    stop = stop or threading.Event()
    table = Table()
    samples = [sample(0.0, None, pool.current_replicas())]
    rows = math.ceil(settings.duration_s)
    for second in range(1, rows + 1):
        if stop.wait(max(0.0, t0 + second - time.monotonic())):
            print("\ninterrupted: stopping workers, scheduler and Redis...", flush=True)
            return samples, True
        outcome = reporter.latest()
        s = sample(time.monotonic() - t0, outcome, pool.current_replicas())
        samples.append(s)
        load = generator.arrivals.per_second(second)[second - 1]
        table.row(s, load, reason_text(outcome))
    return samples, False


def _completed(client: RedisClient, keys: Keys) -> int:
    obs = Observer(client, keys).observe({"demo": ObserveRequest((TASK_TYPE,), 0)})
    return obs["demo"].types[TASK_TYPE].completed_total


def _start_dashboard(stack: contextlib.ExitStack, settings: DemoSettings, url: str) -> str:
    """Serve the dashboard for the run when its extra is installed; its banner line."""
    from taskscale.dashboard import server

    if not server.available():
        return f"\n(no dashboard: {server.MISSING})"
    token = secrets.token_urlsafe(12)
    with socket.socket() as probe:  # the usual port when free, else any
        port = server.DEFAULT_PORT if probe.connect_ex(("127.0.0.1", server.DEFAULT_PORT)) else 0
    running = server.serve_in_thread(url, namespace=settings.namespace, token=token, port=port)
    stack.callback(running.stop)
    return f"\ndashboard: {running.url} (operator token for retries and enqueues: {token})"


def _banner(settings: DemoSettings, url: str, log_dir: Path) -> str:
    p = settings.policy()
    return (
        f"taskscale demo: Redis {url} (namespace {settings.namespace}); scaling local "
        f"'{TASK_TYPE}' workers 0..{p.max_replicas} with {p.tasks_per_replica} threads each, "
        f"idle threshold {settings.idle_threshold_s:g} s, warm-up lead {p.warmup_lead_s:g} s; "
        f"{settings.duration_s:g} s run (Ctrl-C stops early). Worker logs: {log_dir}\n"
        "replicas = current/desired; load/s = tasks that became work that second "
        "(delayed ones when due)"
    )


@contextlib.contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """Ctrl-C or SIGTERM sets the yielded event: the table stops and everything
    is stopped in order, with no KeyboardInterrupt raised at a random point
    (inside a lock, it could hang the shutdown).  A second one interrupts
    the main thread: no more waiting for workers to drain (none is left
    running either)."""
    stop = threading.Event()

    def on_signal(_signum: int) -> None:  # on a thread (taskscale.signals)
        if stop.is_set():
            _thread.interrupt_main()
        stop.set()

    try:
        previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
        on_stop_signals(on_signal)
    except ValueError:  # not the main thread: leave signals alone
        yield stop
        return
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
