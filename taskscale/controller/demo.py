"""``taskscale demo``: the whole autoscaler on one machine, in about a minute.

Why it exists: the README's first command must show what taskscale does --
workers appear when work arrives (from zero, woken by the demand signal,
not a poll), follow a bursty load, warm up *before* a spike of delayed tasks
falls due (look-ahead: no peer can see the schedule), and go back to zero
once every type has been idle past its threshold -- with nothing to install
but Redis and nothing left running afterwards.

It wires the real parts together, unchanged: a ``redis-server`` of its own
(:mod:`~taskscale.controller.localredis`, or ``--redis-url``), the
scheduler that promotes delayed tasks, the :class:`Reconciler` with the
:class:`LocalPool` actuator (``taskscale worker`` subprocesses), and a load
generator using the producer API.  A console reporter keeps the latest pass;
the main thread prints a table row per second, and at the end writes a PNG
(load, queue, active, replicas over time) and a summary computed from what
was measured.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TextIO

import redis

from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.local import LocalPool, LocalPoolSettings
from taskscale.controller.localredis import LocalRedis
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.reconciler import PassOutcome, Reconciler, ReconcilerSettings
from taskscale.controller.types import ScalingPolicy, TypePolicy
from taskscale.keys import Keys
from taskscale.producer import Call, Producer
from taskscale.scheduler import Scheduler

log = logging.getLogger(__name__)

TASK_TYPE = "sleep"
EXAMPLES_MODULE = "taskscale.examples"


@dataclass(frozen=True)
class DemoSettings:
    duration_s: float = 75.0
    out: Path = Path("demo.png")
    redis_url: str | None = None  #: None: start a redis-server of our own
    namespace: str = "taskscale-demo"
    threads: int = 4  #: per worker = tasks per replica
    max_replicas: int = 6
    idle_threshold_s: float = 5.0
    scale_down_stabilization_s: float = 3.0
    warmup_lead_s: float = 8.0
    poll_interval_s: float = 1.0
    #: Peak arrival rate (tasks/s) of the bursts.
    rate_per_s: float = 20.0
    task_min_s: float = 0.2
    task_max_s: float = 1.0
    seed: int = 7
    log_dir: Path | None = None  #: worker logs; None: a temp dir removed at exit

    @property
    def settle_s(self) -> float:
        """Quiet time the run ends with, so replicas can return to zero."""
        return (
            self.idle_threshold_s + self.scale_down_stabilization_s + 3 * self.poll_interval_s + 6
        )

    def policy(self) -> ScalingPolicy:
        return ScalingPolicy(
            types=(TypePolicy(TASK_TYPE, idle_threshold_s=self.idle_threshold_s),),
            tasks_per_replica=self.threads,
            min_replicas=0,
            max_replicas=self.max_replicas,
            scale_down_stabilization_s=self.scale_down_stabilization_s,
            warmup_lead_s=self.warmup_lead_s,
            rate_window_s=10.0,
        )


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    d = DemoSettings()
    parser.description = (
        "Start Redis, a scheduler, the controller with a local pool of worker processes, "
        "and a bursty load of sleep tasks; print a live table, stop after --duration "
        "seconds and write a plot."
    )
    parser.add_argument("--duration", type=float, default=d.duration_s, help="seconds to run")
    parser.add_argument("--out", type=Path, default=d.out, help="PNG plot (default demo.png)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    parser.add_argument("--namespace", default=d.namespace, help="key namespace")
    parser.add_argument("--threads", type=int, default=d.threads, help="threads per worker")
    parser.add_argument("--max-replicas", type=int, default=d.max_replicas)
    parser.add_argument("--idle-threshold", type=float, default=d.idle_threshold_s, help="seconds")
    parser.add_argument("--warmup-lead", type=float, default=d.warmup_lead_s, help="seconds")
    parser.add_argument("--rate", type=float, default=d.rate_per_s, help="peak arrivals per second")
    parser.add_argument("--seed", type=int, default=d.seed, help="load generator seed")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep worker logs here")


def settings_from_args(args: argparse.Namespace) -> DemoSettings:
    return DemoSettings(
        duration_s=args.duration,
        out=args.out,
        redis_url=args.redis_url,
        namespace=args.namespace,
        threads=args.threads,
        max_replicas=args.max_replicas,
        idle_threshold_s=args.idle_threshold,
        warmup_lead_s=args.warmup_lead,
        rate_per_s=args.rate,
        seed=args.seed,
        log_dir=args.log_dir,
    )


# --- the load ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Burst:
    start_s: float
    end_s: float
    rate_per_s: float


@dataclass(frozen=True)
class Spike:
    """Delayed tasks scheduled early, all due at about the same time."""

    enqueue_at_s: float
    due_at_s: float
    count: int


@dataclass(frozen=True)
class LoadPlan:
    bursts: tuple[Burst, ...]
    spike: Spike
    active_s: float  #: the load is over by then; the rest of the run settles


def plan_load(settings: DemoSettings) -> LoadPlan:
    """Bursts with a lull between them and a delayed spike, fitted to the duration.

    Long runs (>= 40 s of load) show two scale-to-zero moments: after the
    first burst and at the end.  Short runs keep one burst and the spike.
    """
    active = settings.duration_s - settings.settle_s
    if active < 4:
        shortest = math.ceil(settings.settle_s + 4)
        raise ValueError(f"--duration must be at least {shortest} s with these settings")
    rate = settings.rate_per_s
    capacity = settings.max_replicas * settings.threads
    bursts: tuple[Burst, ...]
    if active >= 40:
        bursts = (
            Burst(0.05 * active, 0.25 * active, rate * 0.7),
            Burst(0.78 * active, 0.9 * active, rate),
        )
        spike = Spike(0.02 * active, 0.62 * active, 2 * capacity)
    else:
        bursts = (Burst(0.05 * active, 0.45 * active, rate * 0.7),)
        spike = Spike(0.0, 0.75 * active, capacity)
    return LoadPlan(bursts, spike, active)


@dataclass
class Arrivals:
    """What the generator enqueued: (seconds since start, tasks) per batch."""

    ready: list[tuple[float, int]] = field(default_factory=list)
    delayed: list[tuple[float, int]] = field(default_factory=list)  #: keyed by due time

    @property
    def total(self) -> int:
        return sum(n for _, n in self.ready) + sum(n for _, n in self.delayed)

    def per_second(self, seconds: int) -> list[int]:
        """Tasks that became work in each second (ready at enqueue, delayed at due)."""
        out = [0] * max(seconds, 0)
        for at, n in (*self.ready, *self.delayed):
            if 0 <= int(at) < len(out):
                out[int(at)] += n
        return out


class LoadGenerator:
    """Enqueues the plan's tasks from a thread; bursts come in clumps."""

    TICK_S = 0.25

    def __init__(self, producer: Producer, plan: LoadPlan, settings: DemoSettings) -> None:
        self._producer = producer
        self._plan = plan
        self._settings = settings
        self._rng = random.Random(settings.seed)
        self._stop = threading.Event()
        self.arrivals = Arrivals()
        self._thread = threading.Thread(target=self._run, name="demo-load", daemon=True)
        self._t0 = 0.0

    def start(self, t0: float) -> None:
        self._t0 = t0
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _run(self) -> None:
        try:
            self._generate()
        except redis.RedisError as exc:
            log.warning("load generator stopped: %s", exc)

    def _generate(self) -> None:
        spike_sent = False
        tick = 0
        while not self._stop.is_set():
            now = time.monotonic() - self._t0
            if now >= self._plan.active_s:
                return
            if not spike_sent and now >= self._plan.spike.enqueue_at_s:
                self._send_spike(now)
                spike_sent = True
            rate = next((b.rate_per_s for b in self._plan.bursts if b.start_s <= now < b.end_s), 0)
            if rate:
                self._send_clump(now, rate)
            tick += 1
            self._stop.wait(max(0.0, self._t0 + tick * self.TICK_S - time.monotonic()))

    def _calls(self, n: int) -> list[Call]:
        s = self._settings
        return [
            Call(kwargs={"seconds": round(self._rng.uniform(s.task_min_s, s.task_max_s), 2)})
            for _ in range(n)
        ]

    def _send_clump(self, now: float, rate: float) -> None:
        # Bursty: 40% of ticks carry a clump, sized so the mean stays at `rate`.
        if self._rng.random() >= 0.4:
            return
        n = round(self._rng.expovariate(0.4 / (rate * self.TICK_S)))
        if n <= 0:
            return
        self._producer.enqueue_many(TASK_TYPE, self._calls(n))
        self.arrivals.ready.append((now, n))

    def _send_spike(self, now: float) -> None:
        spike = self._plan.spike
        delay = max(0.5, spike.due_at_s - now)
        self._producer.enqueue_many(TASK_TYPE, self._calls(spike.count), delay=delay)
        self.arrivals.delayed.append((now + delay, spike.count))


# --- what the controller did ---------------------------------------------------------------


@dataclass(frozen=True)
class ScaleEvent:
    at: float  #: monotonic
    before: int
    after: int
    reason_code: str


class ConsoleReporter:
    """The reconciler's Reporter for the demo: keeps the latest pass and when
    the target first left zero (for the scale-from-zero figure)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: PassOutcome | None = None
        self.events: list[ScaleEvent] = []
        self.problems: list[str] = []

    def report(self, outcome: PassOutcome) -> None:
        with self._lock:
            self._latest = outcome
            if outcome.scaled and outcome.decision is not None and outcome.current is not None:
                self.events.append(
                    ScaleEvent(
                        time.monotonic(),
                        outcome.current,
                        outcome.decision.desired,
                        outcome.decision.reason_code,
                    )
                )
            if outcome.problem is not None:
                self.problems.append(f"{outcome.problem}: {outcome.message}")

    def latest(self) -> PassOutcome | None:
        with self._lock:
            return self._latest


@dataclass(frozen=True)
class Sample:
    t: float
    queued: int
    due: int
    upcoming: int
    active: int
    replicas: int
    desired: int
    reason_code: str


def sample(t: float, outcome: PassOutcome | None, replicas: int) -> Sample:
    obs = outcome.observation if outcome is not None else None
    types = obs.types.values() if obs is not None else ()
    decision = outcome.decision if outcome is not None else None
    return Sample(
        t=t,
        queued=sum(x.queued for x in types),
        due=sum(x.due for x in types),
        upcoming=sum(x.upcoming for x in types),
        active=sum(x.active for x in types),
        replicas=replicas,
        desired=decision.desired if decision is not None else replicas,
        reason_code=decision.reason_code if decision is not None else "-",
    )


class Table:
    """One row per second; the header again every screenful on a terminal."""

    HEADER = f"{'time':>6} {'load/s':>6} {'queued':>6} {'due':>4} {'upcoming':>8} "
    HEADER += f"{'active':>6} {'replicas':>9}  decision"

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stdout
        self._tty = self._out.isatty()
        self._rows = 0

    def row(self, s: Sample, load: int, reason: str) -> None:
        if self._rows % (25 if self._tty else 10_000) == 0:
            self._print(self.HEADER)
        self._rows += 1
        replicas = f"{s.replicas}/{s.desired}"
        self._print(
            f"{s.t:5.0f}s {load:6d} {s.queued:6d} {s.due:4d} {s.upcoming:8d} "
            f"{s.active:6d} {replicas:>9}  {reason}"
        )

    def _print(self, line: str) -> None:
        print(line, file=self._out, flush=True)


def reason_text(outcome: PassOutcome | None, width: int = 90) -> str:
    if outcome is None or outcome.decision is None:
        return "waiting for the first pass" if outcome is None else outcome.message
    text = f"{outcome.decision.reason_code}: {outcome.decision.reason}"
    return text if len(text) <= width else text[: width - 3] + "..."


# --- the run ------------------------------------------------------------------------------------


@dataclass
class RunResult:
    samples: list[Sample]
    arrivals: Arrivals
    completed: int
    final_replicas: int
    scale_events: int
    #: Per scale-up from zero driven by new work: seconds from the first task
    #: enqueued while at zero to the scale-up.
    reactions_s: list[float]
    #: Scale-ups from zero made by the look-ahead, before any of the work was due.
    lookahead_starts: int
    interrupted: bool
    log_dir: Path


def run_demo(args: argparse.Namespace) -> int:
    """The ``taskscale demo`` command."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args)
        plan = plan_load(settings)
    except ValueError as exc:
        print(f"taskscale demo: {exc}", file=sys.stderr)
        return 2
    with _sigterm_as_interrupt():
        try:
            result = run(settings, plan)
        except KeyboardInterrupt:  # while starting or stopping: everything is stopped
            print("taskscale demo: interrupted", file=sys.stderr)
            return 130
        except (RuntimeError, redis.RedisError) as exc:
            print(f"taskscale demo: {exc}", file=sys.stderr)
            return 1
    _write_plot(result, plan, settings)
    print()
    print(summary(result, plan, settings))
    return 130 if result.interrupted else 0


def run(settings: DemoSettings, plan: LoadPlan) -> RunResult:
    """Start everything, drive the table until the duration is over or
    Ctrl-C, stop everything (in reverse order), and return what was measured."""
    with contextlib.ExitStack() as stack:
        url = settings.redis_url or stack.enter_context(LocalRedis()).url
        log_dir = settings.log_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        client = redis.Redis.from_url(url, socket_timeout=5)
        stack.callback(client.close)
        keys = Keys(settings.namespace)
        completed_before = _completed(client, keys)
        pool = LocalPool(_pool_settings(settings, url, log_dir))
        stack.callback(pool.stop_all, 15.0)
        _start_scheduler(stack, client, keys)
        reporter = ConsoleReporter()
        reconciler = _start_reconciler(stack, settings, url, pool, reporter)
        print(_banner(settings, url, log_dir), flush=True)
        generator = LoadGenerator(Producer(client, keys=keys), plan, settings)
        t0 = time.monotonic()
        generator.start(t0)
        stack.callback(generator.stop)
        samples, interrupted = _drive(settings, generator, reporter, pool, t0)
        final = pool.current_replicas()
        generator.stop()
        reconciler.close()
        pool.stop_all(15.0)
        completed = _completed(client, keys) - completed_before
        return RunResult(
            samples, generator.arrivals, completed, final, len(reporter.events),
            *scale_ups_from_zero(reporter.events, generator.arrivals, t0), interrupted, log_dir,
        )  # fmt: skip


def scale_ups_from_zero(
    events: list[ScaleEvent], arrivals: Arrivals, t0: float
) -> tuple[list[float], int]:
    """(reaction times of demand-driven scale-ups from zero, look-ahead starts)."""
    ready = sorted(at for at, _ in arrivals.ready)
    reactions: list[float] = []
    lookahead = 0
    zero_since = 0.0
    for e in events:
        at = e.at - t0
        if e.after == 0:
            zero_since = at
        elif e.before == 0:
            waiting = [t for t in ready if zero_since <= t <= at]
            if waiting:
                reactions.append(at - waiting[0])
            else:  # nothing ready arrived: only delayed work within the lead (capped or not)
                lookahead += 1
    return reactions, lookahead


def _pool_settings(settings: DemoSettings, url: str, log_dir: Path) -> LocalPoolSettings:
    return LocalPoolSettings(
        types=(TASK_TYPE,),
        redis_url=url,
        namespace=settings.namespace,
        threads=settings.threads,
        imports=(EXAMPLES_MODULE,),
        extra_args=("--grace", "10", "--heartbeat", "1"),
        log_dir=log_dir,
        name_prefix=f"demo-{os.getpid()}",
    )


def _start_scheduler(stack: contextlib.ExitStack, client: redis.Redis, keys: Keys) -> None:
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
    url: str,
    pool: LocalPool,
    reporter: ConsoleReporter,
) -> Reconciler:
    reconciler = Reconciler(reporter=reporter, settings=ReconcilerSettings(max_sleep_s=0.5))
    config = ScalerConfig(
        name="demo",
        namespace="local",
        target="local-pool",
        redis=RedisRef(url=url, key_namespace=settings.namespace),
        policy=settings.policy(),
        poll_interval_s=settings.poll_interval_s,
    )
    reconciler.upsert(config, actuator=pool, redis_url=url)
    stack.callback(reconciler.close)
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
) -> tuple[list[Sample], bool]:
    """One table row per second until the duration is over; Ctrl-C ends it early."""
    table = Table()
    samples = [sample(0.0, None, pool.current_replicas())]
    rows = math.ceil(settings.duration_s)
    try:
        for second in range(1, rows + 1):
            time.sleep(max(0.0, t0 + second - time.monotonic()))
            outcome = reporter.latest()
            s = sample(time.monotonic() - t0, outcome, pool.current_replicas())
            samples.append(s)
            load = generator.arrivals.per_second(second)[second - 1]
            table.row(s, load, reason_text(outcome))
    except KeyboardInterrupt:
        print("\ninterrupted: stopping workers, scheduler and Redis...", flush=True)
        return samples, True
    return samples, False


def _completed(client: redis.Redis, keys: Keys) -> int:
    obs = Observer(client, keys).observe({"demo": ObserveRequest((TASK_TYPE,), 0)})
    return obs["demo"].types[TASK_TYPE].completed_total


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
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the demo the way Ctrl-C does (clean shutdown, no strays)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- the report -------------------------------------------------------------------------------


def replica_seconds(samples: list[Sample]) -> float:
    """Integral of replicas over time (each sample holds until the next)."""
    total, last_t = 0.0, 0.0
    for s in samples:
        total += s.replicas * (s.t - last_t)
        last_t = s.t
    return total


def _replicas_at(samples: list[Sample], t: float) -> int | None:
    """Replicas of the last sample taken before ``t`` (None if the run ended first)."""
    before = [s for s in samples if s.t < t]
    if not before or samples[-1].t < t:
        return None
    return before[-1].replicas


def summary(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> str:
    """One paragraph, every figure computed from the run."""
    samples = result.samples
    ran_s = samples[-1].t if samples else 0.0
    peak = max((s.replicas for s in samples), default=0)
    used = replica_seconds(samples)
    fixed = settings.max_replicas * ran_s
    delayed = sum(n for _, n in result.arrivals.delayed)
    total = result.arrivals.total
    parts = [
        f"Summary: in {ran_s:.0f} s, {total} tasks were enqueued ({total - delayed} right away, "
        f"{delayed} delayed) and {result.completed} completed.",
        f"Replicas peaked at {peak} and ended at {result.final_replicas}, "
        f"after {result.scale_events} scale changes.",
    ]
    warm = _replicas_at(samples, plan.spike.due_at_s)
    if delayed and warm is not None:
        parts.append(
            f"When the {delayed} delayed tasks fell due at {plan.spike.due_at_s:.0f} s, "
            f"{warm} replicas were already up."
        )
    if result.reactions_s:
        times = ", ".join(f"{r:.2f}" for r in result.reactions_s)
        parts.append(
            f"From zero, the controller started workers {times} s after new work was enqueued."
        )
    if result.lookahead_starts:
        parts.append(
            f"{result.lookahead_starts} scale-up(s) from zero came from the look-ahead, "
            "before the delayed work was due."
        )
    usage = f"The workers used {used:.0f} replica-seconds"
    if fixed > 0:
        usage += f", {100 * (1 - used / fixed):.0f}% less than a fixed pool of "
        usage += f"{settings.max_replicas} ({fixed:.0f})"
    parts.append(usage + ".")
    if result.interrupted:
        parts.append("(Interrupted before the end.)")
    return " ".join(parts)


def _write_plot(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> None:
    if not result.samples:
        return
    try:
        path = plot(result, plan, settings)
    except ImportError as exc:
        print(f"no plot: {exc} (pip install 'taskscale[controller]')", file=sys.stderr)
        return
    print(f"plot written to {path}")


def plot(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> Path:
    """Load, queue, active and replicas over time, as a PNG (matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result.samples
    t = [s.t for s in samples]
    load = result.arrivals.per_second(len(samples))
    fig, (ax_load, ax_queue, ax_rep) = plt.subplots(3, 1, sharex=True, figsize=(10, 8))
    ax_load.bar(range(len(load)), load, width=1.0, align="edge", color="#8aa", label="arrivals/s")
    ax_load.set_ylabel("arrivals / s")
    ax_queue.plot(t, [s.queued + s.due for s in samples], label="queued + due")
    ax_queue.plot(t, [s.active for s in samples], label="active")
    ax_queue.plot(t, [s.upcoming for s in samples], "--", label="delayed within lead")
    ax_queue.set_ylabel("tasks")
    ax_rep.step(t, [s.replicas for s in samples], where="post", label="replicas")
    ax_rep.step(t, [s.desired for s in samples], "--", where="post", label="desired")
    ax_rep.set_ylabel("replicas")
    ax_rep.set_xlabel("seconds")
    ax_rep.set_ylim(-0.3, settings.max_replicas + 0.5)
    due = plan.spike.due_at_s
    for ax in (ax_load, ax_queue, ax_rep):
        ax.axvline(due, color="#c44", linestyle=":", linewidth=1)
        ax.axvspan(due - settings.warmup_lead_s, due, color="#fdd", alpha=0.4)
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(alpha=0.3)
    ax_load.set_title(
        f"taskscale demo: '{TASK_TYPE}' tasks, {settings.threads} per replica; "
        f"delayed spike due at {due:.0f} s (shaded: warm-up lead)"
    )
    fig.tight_layout()
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(settings.out, dpi=100)
    plt.close(fig)
    return settings.out
