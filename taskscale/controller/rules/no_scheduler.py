"""The no-scheduler rule: due delayed tasks are no demand while no scheduler lives.

A delayed task that came due stays in the delayed set until a scheduler
promotes it to its ready list; no worker may claim it before.  With no
scheduler alive (``Observation.schedulers_alive == 0``; None = not observed,
counted as alive) those tasks are not work a new replica could take, so the
sizing rule leaves them out of demand, the queue-wait rule ignores how long
they have been due, and so do ``taskscale_oldest_task_age_seconds`` and the
status -- all through :func:`scheduler_alive`, the one definition.  At its place in
the list this rule says in the decision's sentence how many were left out.
"""

from __future__ import annotations

from taskscale.controller.rules.base import Facts, Step
from taskscale.controller.types import Observation


def scheduler_alive(observation: Observation) -> bool:
    """Whether due delayed tasks can become ready: a scheduler lives (or none was observed)."""
    return observation.schedulers_alive != 0


def apply(facts: Facts, step: Step) -> Step:
    """Say how many due delayed tasks the sizing did not count."""
    sizing = step.sizing
    if sizing is None or not sizing.stranded_due:
        return step
    note = (
        f"; {sizing.stranded_due} due delayed task(s) not counted: "
        "no scheduler is alive to make them ready"
    )
    return step.to(step.replicas, step.code, step.why + note)
