"""The data the controller's parts hand to each other.

The controller is four parts with one job each: the *observer* reads Redis
into an :class:`Observation`; the *policy* (pure, no I/O) turns observations,
a :class:`ScalingPolicy` and recent history into a :class:`Decision`; an
*actuator* applies it (a Deployment's ``scale`` subresource, or a local pool
of worker processes); the *reconciler* wires them together and reports
(metrics, Events, status). These frozen dataclasses are the contract between
them, so each part can be tested -- and the simulator can drive the policy --
without the others.  (:func:`busy_by_pod` is here too: what an observation's
workers say about the pods, read by the actuator and the rules alike.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol


@dataclass(frozen=True)
class TypePolicy:
    """Per-task-type settings of a scaler."""

    name: str
    #: Seconds a type must have been idle (nothing queued, due or active, and
    #: ``now - IDLE_SINCE`` at least this) before it stops holding replicas up.
    idle_threshold_s: float = 300.0
    #: Queue-wait target: add replicas while the oldest ready (or due) task of
    #: the type has waited longer than this (None = no target).
    max_queue_wait_s: float | None = None


@dataclass(frozen=True)
class ScalingPolicy:
    """How one target is sized.  Validated by the CRD schema and by
    :func:`validate_policy`; the policy function assumes a valid one."""

    types: tuple[TypePolicy, ...]
    #: Tasks one replica runs at once (its worker thread count); the default
    #: is the default of `taskscale worker --threads` (and the CRD's).
    tasks_per_replica: int = 4
    min_replicas: int = 0
    max_replicas: int = 10
    #: A scale-up is applied only if every recommendation in this window was
    #: at least as high (0 = react at once).
    scale_up_stabilization_s: float = 0.0
    #: A scale-down goes only to the highest recommendation of this window.
    scale_down_stabilization_s: float = 60.0
    #: Most replicas added / removed by one decision (0 = unbounded).
    max_scale_up_step: int = 0
    max_scale_down_step: int = 0
    #: Delayed tasks due within this many seconds count as demand now.
    warmup_lead_s: float = 30.0
    #: Seconds a new node takes before a pod can start on it (0: nodes are
    #: there); added to the warm-up lead for the look-ahead (``lookahead_s``).
    provisioning_lead_s: float = 0.0
    #: Window over which arrival rate and service time are derived.
    rate_window_s: float = 60.0

    def type_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.types)

    @property
    def lookahead_s(self) -> float:
        """How far ahead delayed tasks count as demand: the pod's warm-up plus
        the node's provisioning, so the pod is up when the task comes due."""
        return self.warmup_lead_s + self.provisioning_lead_s

    def queue_wait_types(self) -> tuple[str, ...]:
        """The types with a queue-wait target (their oldest wait is read every pass)."""
        return tuple(t.name for t in self.types if t.max_queue_wait_s is not None)


def validate_policy(policy: ScalingPolicy) -> None:
    """Raise ValueError with a clear message for a policy the controller can't apply."""
    if not policy.types:
        raise ValueError("a scaler needs at least one task type")
    names = policy.type_names()
    if len(set(names)) != len(names):
        raise ValueError(f"task types listed twice: {sorted(names)}")
    for whole, label in (
        (policy.tasks_per_replica, "tasksPerReplica"),
        (policy.min_replicas, "minReplicas"),
        (policy.max_replicas, "maxReplicas"),
        (policy.max_scale_up_step, "maxScaleUpStep"),
        (policy.max_scale_down_step, "maxScaleDownStep"),
    ):
        if isinstance(whole, bool) or not isinstance(whole, int):
            raise ValueError(f"{label} must be a whole number, not {whole!r}")
    if policy.tasks_per_replica < 1:
        raise ValueError("tasksPerReplica must be at least 1")
    if policy.min_replicas < 0:
        raise ValueError("minReplicas must be 0 or more")
    if policy.max_replicas < max(1, policy.min_replicas):
        raise ValueError("maxReplicas must be at least 1 and at least minReplicas")
    for number, label in (
        (policy.scale_up_stabilization_s, "scaleUpStabilizationSeconds"),
        (policy.scale_down_stabilization_s, "scaleDownStabilizationSeconds"),
        (policy.warmup_lead_s, "warmupLeadSeconds"),
        (policy.provisioning_lead_s, "provisioningLeadSeconds"),
        (policy.max_scale_up_step, "maxScaleUpStep"),
        (policy.max_scale_down_step, "maxScaleDownStep"),
    ):
        if not _finite(number) or number < 0:
            raise ValueError(f"{label} must be a finite number >= 0, not {number!r}")
    if not _finite(policy.rate_window_s) or policy.rate_window_s <= 0:
        raise ValueError(f"rateWindowSeconds must be positive, not {policy.rate_window_s!r}")
    for t in policy.types:
        if not _finite(t.idle_threshold_s) or t.idle_threshold_s < 0:
            raise ValueError(
                f"idleThresholdSeconds of {t.name!r} must be a finite number >= 0, "
                f"not {t.idle_threshold_s!r}"
            )
        wait = t.max_queue_wait_s
        if wait is not None and (not _finite(wait) or wait <= 0):
            raise ValueError(f"maxQueueWaitSeconds of {t.name!r} must be positive, not {wait!r}")


def _finite(number: object) -> bool:
    """A real number that is neither NaN nor infinite (``nan < 0`` is False)."""
    return (
        isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number)
    )


@dataclass(frozen=True)
class TypeObservation:
    """What Redis said about one task type, at one instant (Redis clock)."""

    task_type: str
    queued: int = 0  #: ready now, all priority levels
    due: int = 0  #: delayed tasks already due but not yet promoted
    upcoming: int = 0  #: delayed tasks due within the warm-up lead (not yet due)
    active: int = 0  #: ACTIVE_TASKS[type]
    idle_since: float | None = None  #: IDLE_SINCE[type] (unix s); None = never completed
    # Monotonic counters from the type's stats hash (see taskscale.keys.STAT_FIELDS);
    # the policy differences them across history to get rates.
    enqueued_total: int = 0
    claimed_total: int = 0
    completed_total: int = 0
    failed_total: int = 0
    service_ms_total: int = 0
    wait_ms_total: int = 0
    #: Seconds the oldest ready task has waited (head of each priority list,
    #: from its due_ms or enqueued_ms); None = nothing ready or not read.
    oldest_ready_s: float | None = None
    #: Seconds the earliest due (not yet promoted) delayed task has been due.
    oldest_due_s: float | None = None
    dead_total: int = 0  #: tasks dead-lettered (stats field ``dead``)
    cancelled_total: int = 0  #: queued or delayed tasks cancelled (``cancelled``)
    unique_hits_total: int = 0  #: enqueues skipped for a held unique key (``unique_hits``)
    dead_dropped_total: int = 0  #: dead letters dropped by the cap (``dead_dropped``)
    #: Flow-control limits of the type (``taskscale limits``); None = none.
    concurrency_limit: int | None = None  #: most running at once, fleet-wide
    rate_limit_per_s: float | None = None  #: most claims per second
    #: Paused (``taskscale types pause``): its waiting tasks are not demand.
    paused: bool = False

    @classmethod
    def from_values(cls, values: Sequence[object]) -> TypeObservation:
        """One from every field's value, in the order of the fields, unchecked.
        The observer builds one per type per pass (1000s): the frozen
        dataclass's ``__init__`` -- one ``object.__setattr__`` per field --
        cost 3.5 µs each, filling the instance's ``__dict__`` at once a third."""
        obs = object.__new__(cls)
        obs.__dict__.update(zip(_TYPE_OBSERVATION_FIELDS, values, strict=True))
        return obs

    @classmethod
    def from_fields(cls, values: dict[str, object]) -> TypeObservation:
        """One whose attributes are ``values`` (every field's name -> value,
        unchecked), taken as is -- not copied: the observer's per-type
        constructor (0.8 µs against from_values' 1.1)."""
        obs = object.__new__(cls)
        object.__setattr__(obs, "__dict__", values)
        return obs


_TYPE_OBSERVATION_FIELDS = tuple(f.name for f in fields(TypeObservation))


@dataclass(frozen=True)
class WorkerObservation:
    """One live worker from the registry."""

    worker_id: str
    pod: str  #: POD_NAME, or host name outside Kubernetes
    types: tuple[str, ...]
    threads: int
    busy: int  #: tasks in flight now


def busy_by_pod(workers: Iterable[WorkerObservation]) -> dict[str, int]:
    """Tasks in flight per pod (a pod may run several worker processes), 0 for
    an idle pod: the one definition of a busy pod, for the actuator's
    deletion costs and (``rules.base.busy_pods``) for the rules."""
    out: dict[str, int] = {}
    for w in workers:
        out[w.pod] = out.get(w.pod, 0) + w.busy
    return out


@dataclass(frozen=True)
class Observation:
    """Everything one observer round trip read for one scaler."""

    at: float  #: Redis server time of the read, unix seconds
    types: Mapping[str, TypeObservation]
    workers: tuple[WorkerObservation, ...] = ()
    #: Schedulers whose heartbeat lease is live (None = not observed). With
    #: none, due delayed tasks cannot become ready, so they are not demand.
    schedulers_alive: int | None = None

    @classmethod
    def of(
        cls,
        at: float,
        types: Mapping[str, TypeObservation],
        workers: tuple[WorkerObservation, ...],
        schedulers_alive: int | None,
    ) -> Observation:
        """The same as the constructor, unchecked and in half its time (the
        frozen dataclass's ``__init__`` sets each field through
        ``object.__setattr__``): the observer builds one per scaler per pass."""
        obs = object.__new__(cls)
        object.__setattr__(
            obs,
            "__dict__",
            {"at": at, "types": types, "workers": workers, "schedulers_alive": schedulers_alive},
        )
        return obs


class ReasonCode:
    """Small fixed set of decision reasons: metric label values and Event reasons."""

    DEMAND = "Demand"  # queued + due + active needs this many
    RATE_FLOOR = "RateFloor"  # arrival rate x service time needs this many
    LOOKAHEAD = "Lookahead"  # delayed tasks due within the warm-up lead
    IDLE = "Idle"  # every type idle past its threshold -> min
    HOLD_ACTIVE = "HoldActive"  # would go to zero, but tasks are running
    WAITING_IDLE = "WaitingIdle"  # nothing to do, idle threshold not reached yet
    STABILIZING = "Stabilizing"  # held by a stabilization window
    STEP_LIMIT = "StepLimit"  # bounded by the max step
    MIN_REPLICAS = "MinReplicas"
    MAX_REPLICAS = "MaxReplicas"
    FAIL_STATIC = "FailStatic"  # observations missing: hold current
    STEADY = "Steady"  # desired == current, nothing to say
    PAUSED = "Paused"  # a pause annotation holds (or fixes) the replicas
    FALLBACK = "Fallback"  # Redis unreadable for spec.fallback.afterFailures passes
    QUEUE_WAIT = "QueueWait"  # the oldest task waits longer than maxQueueWaitSeconds
    ROLLOUT_HOLD = "RolloutHold"  # a scale-down waits for the Deployment's rollout to end

    ALL = (
        DEMAND,
        RATE_FLOOR,
        LOOKAHEAD,
        IDLE,
        HOLD_ACTIVE,
        WAITING_IDLE,
        STABILIZING,
        STEP_LIMIT,
        MIN_REPLICAS,
        MAX_REPLICAS,
        FAIL_STATIC,
        STEADY,
        PAUSED,
        FALLBACK,
        QUEUE_WAIT,
        ROLLOUT_HOLD,
    )


@dataclass(frozen=True)
class Decision:
    """The policy's answer: how many replicas, and why (for people and metrics)."""

    desired: int
    reason_code: str  #: one of ReasonCode.ALL
    reason: str  #: a sentence, e.g. "3 -> 0: all types idle for 300 s"
    #: Per-type detail for the status (e.g. demand, rate floor) -- optional.
    details: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls, desired: int, reason_code: str, reason: str, details: Mapping[str, float]
    ) -> Decision:
        """The same as the constructor, unchecked and in half its time: the
        rules make one per scaler per pass (rules/base.py)."""
        decision = object.__new__(cls)
        object.__setattr__(
            decision,
            "__dict__",
            {"desired": desired, "reason_code": reason_code, "reason": reason, "details": details},
        )
        return decision


@dataclass(frozen=True)
class Rollout:
    """A Deployment's rollout as its ``metadata.generation``, ``spec`` and
    ``status`` report it (what the rollout hold, rules/rollout_hold.py, reads)."""

    generation: int
    observed_generation: int
    replicas: int  #: spec.replicas
    updated: int  #: status.updatedReplicas: pods of the newest revision
    total: int  #: status.replicas: pods of every revision, the surge included
    unavailable: int = 0  #: status.unavailableReplicas
    paused: bool = False  #: spec.paused: the rollout waits for a person
    stalled: bool = False  #: Progressing=False (ProgressDeadlineExceeded)

    def waiting_for(self) -> str:
        """What the rollout still waits for, as a clause; "" when it is done
        -- or paused or stalled, which a person ends, not time."""
        if self.paused or self.stalled:
            return ""
        if self.observed_generation < self.generation:
            return (
                f"generation {self.generation} not yet observed "
                f"(observedGeneration {self.observed_generation})"
            )
        unavailable = f", {self.unavailable} unavailable" if self.unavailable else ""
        if self.updated < self.replicas:
            return f"{self.updated} of {self.replicas} pods updated{unavailable}"
        if self.total > self.updated:
            old = self.total - self.updated
            return f"{old} old {'pod' if old == 1 else 'pods'} still running{unavailable}"
        return ""


@dataclass(frozen=True)
class Protection:
    """What one pass did to keep a scaler's busy pods from voluntary
    disruption (issue 23): the pods it marks busy, the pods on a node being
    drained (flagged in Redis: they claim nothing), and the draining pods that
    finished their work on this pass (unmarked: their eviction may proceed)."""

    protected: tuple[str, ...] = ()  #: busy pods, marked (PDB label, do-not-disrupt)
    draining: Mapping[str, str] = field(default_factory=dict)  #: pod -> its leaving node
    newly_draining: tuple[str, ...] = ()  #: pods flagged on this pass
    drained: Mapping[str, float] = field(default_factory=dict)  #: pod -> seconds its drain waited


class Actuator(Protocol):
    """Applies a replica count to one target.  Implementations: the
    Kubernetes Deployment ``scale`` subresource, and a local process pool."""

    def current_replicas(self) -> int:
        """Replicas the target is set to now (raise on a missing target)."""
        ...

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        """Set the target to ``replicas``.  On a scale-down, ``busy_by_pod``
        (pod or worker name -> tasks in flight) lets the actuator remove idle
        workers first (Kubernetes: pod-deletion-cost; local: stop idle ones)."""
        ...

    def rollout(self) -> Rollout | None:
        """The target's rollout now (a Deployment's), or None for a target
        that has none (a local pool, a StatefulSet, a custom resource)."""
        ...
