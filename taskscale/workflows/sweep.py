"""The scheduler's watch over running workflows: a workflow whose step was
lost is ended as failed, with a reason, so no parent waits forever.

A step's task is an ordinary task: a worker that dies returns it through
its lease (the reaper), a retry goes through the delayed set.  Every move of
a task is one script, so a ready step's task is always in a ready list, the
delayed set or an in-flight hash -- unless something outside the workflow
removed it (an operator's purge, a cancel by task id, an envelope the claim
script dead-lettered).  ``workflow_sweep.lua`` looks for the task of every
step ready for longer than ``lost_after_s`` and ends the workflow when it is
nowhere.  The same pass reads the namespace's workflow counters for the
scheduler's metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from taskscale import checks
from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.text import as_text

#: Seconds a step must have been ready before its task may count as lost.
DEFAULT_LOST_AFTER_S = 60.0
#: Most workflows looked at per pass (the oldest first).
DEFAULT_MOST = 1000
#: Most ready-list / delayed-set entries read per search for one task.
SEARCH_DEPTH = 100_000


@dataclass(frozen=True)
class SweepResult:
    checked: int
    #: (workflow id, reason) of each workflow this pass ended.
    ended: list[tuple[str, str]] = field(default_factory=list)
    #: The namespace's counters (started, succeeded, failed, cancelled, steps_waiting).
    totals: dict[str, int] = field(default_factory=dict)
    running: int = 0


def sweep(
    client: RedisClient,
    keys: Keys,
    *,
    lost_after_s: float = DEFAULT_LOST_AFTER_S,
    most: int = DEFAULT_MOST,
) -> SweepResult:
    """One ``workflow_sweep.lua`` call, then the counters."""
    checks.seconds("lost_after_s", lost_after_s, positive=True)
    checks.whole("most", most, least=1)
    reply = bound_script(client, "workflow_sweep")(
        keys=[keys.workflows, keys.workers],
        args=[keys.prefix, round(lost_after_s * 1000), most, SEARCH_DEPTH],
        client=client,
    )
    checked = int(reply[0])
    ended = [(as_text(reply[i]), as_text(reply[i + 1])) for i in range(2, len(reply), 2)]
    raw = client.hgetall(keys.workflow_totals)
    totals = {as_text(k): int(v) for k, v in raw.items()}
    return SweepResult(checked, ended, totals, int(client.zcard(keys.workflows)))
