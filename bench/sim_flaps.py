"""Replica flaps in the simulation: a scale-down undone by a scale-up inside
the scale-down window, on the benchmark traces and on the demo's load.

A flap is what issue 26 saw in the demo (3 -> 2 -> 3 within a second): the
policy removed pods its own next passes asked back for, the load unchanged.
A scale-up that follows a rise of the load is not one: a segment of a
higher rate starting (a burst after a trickle), or a scheduled batch coming
due, between the scale-down and the scale-up plus the warm-up lead (the
look-ahead asks for it that early).  A scale-down to zero is the idle rule's
bet that the type stays idle; a task after it is a cold start, which
``bench.simulate`` counts apart.

:func:`demo_trace` is the demo's load (``taskscale.demo.load``: its plan,
its clumps every ``LoadGenerator.TICK_S`` from the same seeded generator,
its task durations) as a :class:`~bench.sim_trace.Trace`, so the policy can
be played against it here, in CPU time, without workers.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from bench.sim_trace import Arrival, Segment, Trace, TraceSettings
from taskscale.demo.load import DemoSettings, LoadGenerator, plan_load


@dataclass(frozen=True)
class Flap:
    down_at: float
    down: tuple[int, int]  #: replicas from, to
    up_at: float
    up: tuple[int, int]


def flaps(
    changes: Sequence[tuple[float, int, int]],
    *,
    window_s: float,
    load_changes: Sequence[float],
    lead_s: float,
) -> list[Flap]:
    """Scale-downs (not to zero) undone within ``window_s`` with no load
    change between the scale-down and the scale-up plus ``lead_s``."""
    out: list[Flap] = []
    last: tuple[float, int, int] | None = None
    for at, before, after in changes:
        if after < before:
            last = (at, before, after) if after > 0 else None
            continue
        rose = last is not None and any(last[0] < c <= at + lead_s for c in load_changes)
        if last is not None and at - last[0] < window_s and not rose:
            out.append(Flap(last[0], (last[1], last[2]), at, (before, after)))
        last = None
    return out


def load_changes(trace: Trace) -> list[float]:
    """When the load rises: a segment of a higher rate than the one before
    starting, a scheduled batch coming due."""
    due = {a.ready_at for a in trace.arrivals if a.delayed}
    segments = trace.segments
    rises = {b.start for a, b in itertools.pairwise(segments) if b.rate > a.rate}
    return sorted(rises | due)


def demo_trace(settings: DemoSettings | None = None) -> Trace:
    """The demo's load as a trace: one segment per burst and per gap."""
    s = settings or DemoSettings()
    plan = plan_load(s)
    rng = random.Random(s.seed)
    tick_s = LoadGenerator.TICK_S
    arrivals: list[Arrival] = []

    def durations(n: int) -> list[float]:
        return [round(rng.uniform(s.task_min_s, s.task_max_s), 2) for _ in range(n)]

    spike_sent = False
    tick = 0
    while (now := tick * tick_s) < plan.active_s:
        if not spike_sent and now >= plan.spike.enqueue_at_s:
            due = now + max(0.5, plan.spike.due_at_s - now)
            arrivals += [Arrival(now, due, d) for d in durations(plan.spike.count)]
            spike_sent = True
        rate = next((b.rate_per_s for b in plan.bursts if b.start_s <= now < b.end_s), 0)
        if rate and rng.random() < 0.4:
            n = round(rng.expovariate(0.4 / (rate * tick_s)))
            arrivals += [Arrival(now, now, d) for d in durations(max(n, 0))]
        tick += 1
    edges = sorted({0.0, plan.active_s, *(x for b in plan.bursts for x in (b.start_s, b.end_s))})
    rates = {b.start_s: b.rate_per_s for b in plan.bursts}
    segments = tuple(
        Segment(a, b, "burst" if a in rates else "gap", rates.get(a, 0.0))
        for a, b in itertools.pairwise(edges)
    )
    arrivals.sort(key=lambda a: a.enqueued_at)
    return Trace(
        seed=s.seed,
        arrivals=tuple(arrivals),
        segments=segments,
        settings=TraceSettings(duration_s=s.duration_s, spikes_at=(plan.spike.due_at_s,)),
    )
