"""The scaling policy driven as the reconciler drives it, for the pure policy
tests: a policy, an observation of some types at a time, and one round
(decide, then record in the History)."""

from __future__ import annotations

from typing import Any

from taskscale.controller.policy import History, decide
from taskscale.controller.types import (
    Decision,
    Observation,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
)

#: A fixed clock (seconds) the policy tests start from.
T0 = 1_763_750_000.0


def make_policy(*names: str, idle_s: float = 300.0, **settings: Any) -> ScalingPolicy:
    base: dict[str, Any] = {
        "tasks_per_replica": 4,
        "min_replicas": 0,
        "max_replicas": 10,
        "scale_up_stabilization_s": 0.0,
        "scale_down_stabilization_s": 0.0,
    }
    base.update(settings)
    types = tuple(TypePolicy(n, idle_threshold_s=idle_s) for n in (names or ("a",)))
    return ScalingPolicy(types=types, **base)


def observe(at: float, workers: tuple[WorkerObservation, ...] = (), **types: Any) -> Observation:
    """``observe(t, a={"queued": 3})`` -> an Observation of type a at time t."""
    return Observation(
        at=at,
        types={name: TypeObservation(name, **fields) for name, fields in types.items()},
        workers=workers,
    )


def step(
    policy: ScalingPolicy,
    history: History,
    at: float,
    current: int,
    observation: Observation | None = None,
    **types: Any,
) -> Decision:
    """One reconcile round as the reconciler does it: decide, then record."""
    obs = observation if observation is not None else observe(at, **types)
    decision = decide(obs, policy, history, now=at, current=current)
    history.record(at, obs, decision)
    return decision


def busy_pod(pod: str, busy: int) -> WorkerObservation:
    return WorkerObservation(worker_id=pod, pod=pod, types=("a",), threads=4, busy=busy)
