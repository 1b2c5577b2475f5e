"""What one reconcile pass hands on: its :class:`PassOutcome`, the
:class:`Problem` reasons of a failed pass, and the :class:`Reporter`
protocol that turns outcomes into status, conditions, Events or console
lines (kube_status.py, the demo's console, or :class:`LoggingReporter`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from taskscale.controller.config import ScalerConfig
from taskscale.controller.job_demand import JobCensus
from taskscale.controller.types import Decision, Observation, Protection

#: The reconciler's logger (the outcome types moved out of reconciler.py).
log = logging.getLogger("taskscale.controller.reconciler")


class TargetNotFound(LookupError):
    """The scale target does not exist (raised by actuators)."""


class Problem:
    """Why a pass could not do its job: condition and Event reasons."""

    REDIS_UNREACHABLE = "RedisUnreachable"
    TARGET_NOT_FOUND = "TargetNotFound"
    SCALE_FAILED = "ScaleFailed"
    #: another TaskScaler owns the same target (controller/target_owner.py)
    TARGET_CONFLICT = "TargetConflict"


@dataclass(frozen=True)
class PassOutcome:
    """What one pass of one scaler saw and did; reporters turn it into
    status, conditions, Events or console lines."""

    config: ScalerConfig
    at: float  #: wall-clock time of the pass (unix s)
    observation: Observation | None  #: None: Redis could not be read
    current: int | None  #: replicas before the pass; None: target unreadable
    decision: Decision | None  #: None when the target could not be read
    scaled: bool = False  #: the target was changed to ``decision.desired``
    redis_error: str | None = None
    problem: str | None = None  #: a Problem constant (the pass failed)
    message: str = ""  #: what went wrong, for a condition or an Event
    jobs: JobCensus | None = None  #: Job mode: the scaler's Jobs by phase (job_demand.py)
    #: busy pods marked, pods draining (None: not known on this pass)
    protection: Protection | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


class Reporter(Protocol):
    """Where outcomes go: Kubernetes status + Events, or the demo's console."""

    def report(self, outcome: PassOutcome) -> None: ...


class LoggingReporter:
    """Logs scale changes and problems (the default when nothing else is wanted)."""

    def report(self, outcome: PassOutcome) -> None:
        if outcome.problem is not None:
            log.warning("%s: %s: %s", outcome.config.key, outcome.problem, outcome.message)
        elif outcome.scaled and outcome.decision is not None:
            log.info("%s: %s", outcome.config.key, outcome.decision.reason)
