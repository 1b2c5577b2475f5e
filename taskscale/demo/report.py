"""What ``taskscale demo`` saw: the reconciler's passes as samples, the
run's result and the summary computed from it.  The console table is
:mod:`~taskscale.demo.table`, the plot
:mod:`~taskscale.demo.plot`."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from taskscale.controller.outcome import PassOutcome
from taskscale.demo.load import Arrivals, DemoSettings, LoadPlan


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
    #: Per scale-up from zero for new work, in run seconds: (the decision,
    #: the first task started after it -- None if none was seen).
    from_zero: list[tuple[float, float | None]] = field(default_factory=list)

    def first_task_delays(self) -> list[float]:
        """Seconds from each such decision to the first task that ran."""
        return [first - at for at, first in self.from_zero if first is not None]


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
            f"From zero, the controller decided to start workers {times} s after new work "
            "was enqueued."
        )
    delays = result.first_task_delays()
    if delays:
        times = ", ".join(f"{d:.2f}" for d in delays)
        parts.append(
            f"The first task then ran {times} s after that decision: the time a new local "
            "worker process takes to start (interpreter, imports, Redis, registration)."
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
