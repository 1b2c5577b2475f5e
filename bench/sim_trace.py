"""Arrival traces for the scaling simulation: bursts, lulls and scheduled spikes.

A trace is fixed by its seed, so both autoscalers face exactly the same work:
the same tasks, arriving at the same instants, each taking the same time.
Scheduled spikes are delayed tasks enqueued well before they are due; only a
scaler that reads the delayed schedule (taskscale's look-ahead) can use that.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class TraceSettings:
    """The shape of the load; the defaults give one bursty hour."""

    duration_s: float = 3600.0
    lull_s: tuple[float, float] = (120.0, 420.0)  #: no arrivals at all
    trickle_s: tuple[float, float] = (120.0, 480.0)
    trickle_rate: tuple[float, float] = (0.1, 0.5)  #: tasks per second
    burst_s: tuple[float, float] = (20.0, 90.0)
    burst_rate: tuple[float, float] = (6.0, 16.0)
    #: (kind, weight) of the next segment
    mix: tuple[tuple[str, float], ...] = (("lull", 0.3), ("trickle", 0.45), ("burst", 0.25))
    spikes_at: tuple[float, ...] = (1200.0, 2700.0)  #: due times of scheduled batches
    spike_size: tuple[int, int] = (150, 300)
    spike_notice_s: float = 600.0  #: how long before its due time a batch is scheduled
    service_median_s: float = 2.0  #: lognormal service time
    service_sigma: float = 0.6


@dataclass(frozen=True)
class Arrival:
    """One task: enqueued at ``enqueued_at``; ready (runnable) at ``ready_at``."""

    enqueued_at: float
    ready_at: float  #: later than enqueued_at for a delayed (scheduled) task
    service_s: float

    @property
    def delayed(self) -> bool:
        return self.ready_at > self.enqueued_at


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    kind: str
    rate: float


@dataclass(frozen=True)
class Trace:
    seed: int
    arrivals: tuple[Arrival, ...]  #: sorted by enqueued_at
    segments: tuple[Segment, ...]
    settings: TraceSettings


def make_trace(seed: int, settings: TraceSettings | None = None) -> Trace:
    """The trace of ``seed``: random segments, Poisson arrivals, lognormal service."""
    cfg = settings or TraceSettings()
    rng = random.Random(seed)
    segments = _segments(rng, cfg)
    arrivals = [a for seg in segments for a in _poisson(rng, cfg, seg)]
    arrivals += _spikes(rng, cfg)
    arrivals.sort(key=lambda a: a.enqueued_at)
    return Trace(seed=seed, arrivals=tuple(arrivals), segments=tuple(segments), settings=cfg)


def _segments(rng: random.Random, cfg: TraceSettings) -> list[Segment]:
    kinds = [k for k, _ in cfg.mix]
    weights = [w for _, w in cfg.mix]
    bounds = {
        "lull": (cfg.lull_s, (0.0, 0.0)),
        "trickle": (cfg.trickle_s, cfg.trickle_rate),
        "burst": (cfg.burst_s, cfg.burst_rate),
    }
    out: list[Segment] = []
    t = 0.0
    while t < cfg.duration_s:
        kind = rng.choices(kinds, weights)[0]
        (lo, hi), (rlo, rhi) = bounds[kind]
        end = min(cfg.duration_s, t + rng.uniform(lo, hi))
        out.append(Segment(t, end, kind, rng.uniform(rlo, rhi)))
        t = end
    return out


def _service(rng: random.Random, cfg: TraceSettings) -> float:
    return rng.lognormvariate(math.log(cfg.service_median_s), cfg.service_sigma)


def _poisson(rng: random.Random, cfg: TraceSettings, seg: Segment) -> list[Arrival]:
    out: list[Arrival] = []
    if seg.rate <= 0:
        return out
    t = seg.start + rng.expovariate(seg.rate)
    while t < seg.end:
        out.append(Arrival(t, t, _service(rng, cfg)))
        t += rng.expovariate(seg.rate)
    return out


def _spikes(rng: random.Random, cfg: TraceSettings) -> list[Arrival]:
    out: list[Arrival] = []
    for due in cfg.spikes_at:
        if due >= cfg.duration_s:
            continue
        scheduled = max(0.0, due - cfg.spike_notice_s)
        for _ in range(rng.randint(*cfg.spike_size)):
            out.append(Arrival(scheduled, due, _service(rng, cfg)))
    return out
