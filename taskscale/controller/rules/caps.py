"""The concurrency-cap rule: a type capped at K running counts at most K tasks.

``taskscale limits set T --concurrency K`` keeps every worker from claiming a
Kth-plus-one task of T (claim.lua), so replicas beyond what K tasks occupy
would sit idle however long T's queue is: alone, a capped type never asks for
more than ceil(K / tasks-per-replica) replicas.  The sizing rule counts each
type through :func:`within_cap` (in its one loop over the types: a hook per
type would cost every decision over 1000 types), which drops T's demand
beyond K (upcoming first, then queued, then due); the rate floor is capped
at K there too.  At its place in the list this rule says in the decision's
sentence how many tasks wait beyond a cap.
"""

from __future__ import annotations

import dataclasses
import math

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import TypeObservation


def within_cap(obs: TypeObservation, tpr: int, notes: list[str]) -> tuple[TypeObservation, int]:
    """A type capped at K running can keep K tasks busy, no more: its demand
    beyond K (upcoming first, then queued, then due) is not counted."""
    cap, waiting = obs.concurrency_limit or 0, obs.upcoming + obs.queued + obs.due
    over = min(waiting, waiting + obs.active - cap)
    if not cap or over <= 0:
        return obs, 0
    left, kept = over, []
    for value in (obs.upcoming, obs.queued, obs.due):
        kept.append(value - min(value, left))
        left -= value - kept[-1]
    notes.append(f"{obs.task_type!r} runs at most {cap}: {math.ceil(cap / tpr)} replicas at most")
    return dataclasses.replace(obs, upcoming=kept[0], queued=kept[1], due=kept[2]), over


def apply(facts: Facts, step: Step) -> Step:
    """Say how many tasks wait beyond a concurrency cap (not counted by the sizing)."""
    sizing = step.sizing
    if sizing is None or not sizing.capped:
        return step
    note = f"; {sizing.capped} more waiting beyond a concurrency cap ({sizing.cap_note})"
    return step.to(step.replicas, step.code, step.why + note)
