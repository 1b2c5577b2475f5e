"""What every scaling rule reads (:class:`Facts`) and hands on (:class:`Step`).

A rule is a pure function ``(facts, step) -> step`` (:data:`Rule`); the
registry (``rules/__init__.py``) applies them in one ordered list, for the
reconcile pass and for ``policy.decide`` (and so for the simulator) alike.
The types they share live here, apart from the rules, so that a rule module
imports this one and nothing of the registry: the pass's settings a rule
reads (:class:`Pause`, :class:`Fallback`) are here for that reason too.

``Facts`` and ``Step`` are NamedTuples: immutable, and built in a fraction of
a frozen dataclass's time -- ``decide`` runs for every scaler on every pass,
and a rule that changes nothing returns the step it was given.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from taskscale.controller.history import RECOMMENDATION, History
from taskscale.controller.types import Decision, Observation, Rollout, ScalingPolicy, busy_by_pod

#: The pause annotations (read by rules/pause.py).
PAUSED_ANNOTATION = "taskscale.io/paused"
PAUSED_REPLICAS_ANNOTATION = "taskscale.io/paused-replicas"


@dataclass(frozen=True)
class Pause:
    """A paused scaler: hold as is (``replicas`` None) or set and hold N."""

    replicas: int | None = None

    def describe(self) -> str:
        if self.replicas is None:
            return f"paused by {PAUSED_ANNOTATION}: holding the current replicas"
        return f"paused by {PAUSED_REPLICAS_ANNOTATION}: holding {self.replicas} replicas"


@dataclass(frozen=True)
class Fallback:
    """``spec.fallback``: ``replicas`` after ``after_failures`` failed reads in a row."""

    replicas: int
    after_failures: int = 3


class Facts(NamedTuple):
    """What one decision is made from; every rule gets the same facts."""

    observation: Observation | None  #: None: Redis could not be read
    policy: ScalingPolicy
    history: History
    now: float  #: the caller's clock (the stabilization windows use it)
    current: int  #: the target's replicas now
    # The scaler's settings beyond its policy: only the reconcile pass has
    # them (``policy.decide`` leaves them empty, so those rules change nothing).
    pause: Pause | None = None
    fallback: Fallback | None = None
    redis_failures: int = 0  #: passes in a row that could not read Redis
    redis_error: str = ""
    statefulset: str | None = None  #: the target's name when it is a StatefulSet
    #: A Deployment's rollout, read by the pass only to check a scale-down
    #: (rules/rollout_hold.py); None: not read, or the target has none.
    rollout: Rollout | None = None
    #: pods of the target on a leaving node, flagged in Redis (rules/drain_capacity.py)
    draining: frozenset[str] = frozenset()


class Sizing(NamedTuple):
    """What the observation asks for, summed over the scaler's types by the
    sizing rule (rules/sizing.py) for the rules after it."""

    queued: int
    due: int
    active: int
    upcoming: int
    busy_rate: float  #: tasks kept busy by arrivals (Little's law), non-idle types
    busy_pods: int
    all_idle: bool
    idle_note: str  #: which type is not idle yet, and for how long still
    details: dict[str, float]  #: the decision's details (rates, service times)
    stranded_due: int  #: due delayed tasks not counted: no scheduler alive
    capped: int  #: tasks of capped types beyond their cap: not counted
    cap_note: str

    @property
    def work(self) -> int:
        return self.queued + self.due + self.active


class Step(NamedTuple):
    """The decision so far: what the rules before asked for, and why."""

    replicas: int
    code: str  #: one of ReasonCode.ALL
    why: str  #: the sentence after "current -> replicas: "
    #: The raw recommendation the windows remember (``RECOMMENDATION``): set
    #: by the sizing rule and raised by the queue-wait rule; None = no policy.
    recommendation: int | None = None
    sizing: Sizing | None = None  #: set by the sizing rule
    #: An override decided alone (pause, fallback, fail-static): no rule after it runs.
    final: bool = False

    def to(self, replicas: int, code: str, why: str) -> Step:
        """This step with other replicas and reason (same recommendation and sizing)."""
        return Step(replicas, code, why, self.recommendation, self.sizing, self.final)

    def decision(self, current: int) -> Decision:
        """The :class:`Decision` this step stands for, from ``current`` replicas."""
        details = self.sizing.details if self.sizing is not None else {}
        if self.recommendation is not None:
            details[RECOMMENDATION] = self.recommendation
        return Decision.of(
            self.replicas, self.code, f"{current} -> {self.replicas}: {self.why}", details
        )


#: A scaling rule: a pure function of the facts and the step so far.
Rule = Callable[[Facts, Step], Step]


def busy_pods(observation: Observation) -> set[str]:
    """Pods with a task in flight: those :func:`busy_by_pod` counts above 0
    (the pods the actuator's deletion costs protect)."""
    return {pod for pod, busy in busy_by_pod(observation.workers).items() if busy > 0}


def busy_pod_count(observation: Observation) -> int:
    """How many pods :func:`busy_pods` names, without making the set (the
    sizing rule's count, once a scaler a pass)."""
    n = 0
    for busy in busy_by_pod(observation.workers).values():
        if busy > 0:
            n += 1
    return n


def ceil_div(tasks: float, per_replica: int) -> int:
    """Replicas ``tasks`` need at ``per_replica`` each (0 for none)."""
    return math.ceil(tasks / per_replica - 1e-9) if tasks > 0 else 0
