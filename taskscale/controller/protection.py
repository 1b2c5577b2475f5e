"""One pass's protection of a scaler's pods from voluntary disruption (issue 23).

Called by the reconcile pass on every pass with an observation (never
without one: with no registry read, no pod is known idle, so no mark is
removed): the actuator marks the busy pods and unmarks the idle ones
(controller/disruption.py, through :class:`Protecting`), the pods on a
leaving node get the Redis drain flag and the others lose it
(controller/drain_flags.py), flags of pods that are gone are cleared, and
the result is one :class:`~taskscale.controller.types.Protection` for the
outcome (metrics, Events, status, the console's Scaling page).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from taskscale.controller.drain_flags import sync_flags
from taskscale.controller.types import Observation, Protection, busy_by_pod
from taskscale.redis_urls import RedisClient

if TYPE_CHECKING:  # the Kubernetes client is the controller extra's: the demo's
    # local pool runs this module without it
    from taskscale.controller.disruption import PodMarks


@runtime_checkable
class Protecting(Protocol):
    """An actuator whose pods can be marked (a target with a label selector)."""

    def mark_pods(self, busy_by_pod: Mapping[str, int]) -> PodMarks | None:
        """Mark busy pods, unmark idle ones; None when the pods can't be found."""
        ...

    def pods_gone(self, names: Collection[str]) -> set[str]:
        """Which of ``names`` no longer exist."""
        ...


def protect(
    actuator: object, client: RedisClient, key_namespace: str, observation: Observation | None
) -> Protection | None:
    """Mark, flag and clear for one pass; None when there is nothing to protect
    (no registry read, or a target whose pods can't be found)."""
    if observation is None or not isinstance(actuator, Protecting):
        return None
    marks = actuator.mark_pods(busy_by_pod(observation.workers))
    if marks is None:
        return None
    leaving = dict(marks.leaving)
    clear = [pod for pod in marks.live if pod not in leaving]
    flags = sync_flags(client, key_namespace, sorted(leaving), clear)
    ours = set(marks.live) | set(marks.terminating)
    stale = sorted(set(flags.since_ms) - ours)
    if stale:
        gone = actuator.pods_gone(stale)
        if gone:
            sync_flags(client, key_namespace, (), sorted(gone))
    drained = {}
    for pod in marks.unmarked:
        since = flags.since_ms.get(pod)
        if pod in leaving and since is not None:
            drained[pod] = max(0.0, observation.at - since / 1000)
    return Protection(
        protected=marks.protected,
        draining=leaving,
        newly_draining=tuple(p for p in flags.new if p in leaving),
        drained=drained,
    )
