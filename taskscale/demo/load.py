"""What ``taskscale demo`` will do: its settings and command-line flags, and
the bursty load it enqueues (bursts, spikes and delayed tasks, seeded)."""

from __future__ import annotations

import argparse
import logging
import math
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from taskscale.cli.common import seconds, threads, whole
from taskscale.controller.types import ScalingPolicy, TypePolicy, validate_policy
from taskscale.keys import check_name
from taskscale.limits import parse_rate
from taskscale.logs import DEFAULT_FORMAT, add_logging_arguments
from taskscale.producer import Call, Producer
from taskscale.redis_urls import check_url

log = logging.getLogger("taskscale.demo")


TASK_TYPE = "sleep"
EXAMPLES_MODULE = "taskscale.examples"


@dataclass(frozen=True)
class DemoSettings:
    duration_s: float = 75.0
    out: Path = Path("demo.svg")
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
    #: the demo's own log and its workers' (text or json)
    log_format: str = DEFAULT_FORMAT

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


#: The most worker processes the demo starts on this machine.
MAX_REPLICAS = 64
#: The highest peak arrival rate (tasks/s) the demo enqueues.
MAX_RATE = 10_000.0


def rate(text: str) -> float:
    """argparse type: a finite arrival rate >= 0 (0: only the delayed spike),
    at most :data:`MAX_RATE` tasks per second: a number (per second) or N/UNIT
    as ``limits set --rate`` reads it (``limits.parse_rate``: 600/min)."""
    try:
        if "/" in text:
            count, period_s = parse_rate(text)
            value = count / period_s
        else:
            value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of tasks per second nor N/UNIT (600/min)"
        ) from None
    if not math.isfinite(value) or not 0 <= value <= MAX_RATE:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a number of tasks per second from 0 to {MAX_RATE:g}"
        )
    return value


def replicas(text: str) -> int:
    """argparse type: the most worker processes, 1 to :data:`MAX_REPLICAS`."""
    return whole(text, least=1, most=MAX_REPLICAS)


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    d = DemoSettings()
    parser.description = (
        "Start Redis, a scheduler, the controller with a local pool of worker processes, "
        "and a bursty load of sleep tasks; print a live table, stop after --duration "
        "seconds and write a plot."
    )
    add = parser.add_argument
    add("--duration", type=seconds, default=d.duration_s, help="seconds to run")
    add("--out", type=Path, default=d.out, help="SVG plot (default demo.svg)")
    add("--redis-url", default=None, help="use this Redis instead of starting one")
    add("--namespace", default=d.namespace, help="key namespace")
    add("--threads", type=threads, default=d.threads, help="threads per worker")
    add(
        "--max-replicas",
        type=replicas,
        default=d.max_replicas,
        help=f"most worker processes, 1-{MAX_REPLICAS} (default {d.max_replicas})",
    )
    add("--idle-threshold", type=seconds, default=d.idle_threshold_s, help="seconds")
    add("--warmup-lead", type=seconds, default=d.warmup_lead_s, help="seconds")
    add(
        "--rate",
        type=rate,
        default=d.rate_per_s,
        help="peak arrivals per second, or N/UNIT (600/min)",
    )
    add("--seed", type=int, default=d.seed, help="load generator seed")
    add("--log-dir", type=Path, default=None, help="keep worker logs here")
    # its own log (warnings by default: the table is the output) and its workers'
    add_logging_arguments(parser, default_level="warning", from_env=False)


def settings_from_args(args: argparse.Namespace) -> DemoSettings:
    """The settings the command line asks for, checked (ValueError: one sentence)."""
    check_name("namespace", args.namespace)
    if args.redis_url is not None:
        check_url(args.redis_url)
        if not args.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("--redis-url: the demo needs one Redis server (redis://, rediss://)")
    if args.out.is_dir():
        raise ValueError(f"--out {str(args.out)!r} is a directory: name the PNG file")
    if args.log_dir is not None and args.log_dir.exists() and not args.log_dir.is_dir():
        raise ValueError(f"--log-dir {str(args.log_dir)!r} is not a directory")
    settings = DemoSettings(
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
        log_format=args.log_format,
    )
    validate_policy(settings.policy())
    return settings


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
