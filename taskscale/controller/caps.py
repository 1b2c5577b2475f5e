"""The concurrency-cap rule: a type capped at K running counts at most K tasks.

``taskscale limits set T --concurrency K`` keeps every worker from claiming a
Kth-plus-one task of T (claim.lua), so replicas beyond what K tasks occupy
would sit idle however long T's queue is: alone, a capped type never asks for
more than ceil(K / tasks-per-replica) replicas.  The sizing drops T's demand
beyond K (upcoming first, then queued, then due) and the decision sentence
says how many tasks wait beyond a cap.

Pure, like the policy; ``policy.decide`` calls :func:`within_cap` per type.
"""

from __future__ import annotations

import dataclasses
import math

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
