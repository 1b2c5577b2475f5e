"""Facts and steps for the rule tests (tests/controller/test_rule_*.py): one
rule's ``apply`` called alone, with only what the test is about set."""

from __future__ import annotations

from typing import Any

from taskscale.controller.history import History
from taskscale.controller.rules.base import Facts, Sizing, Step
from taskscale.controller.types import (
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
)

T0 = 1_763_750_000.0


def policy(*types: TypePolicy, **settings: Any) -> ScalingPolicy:
    """A policy of ``types`` (default: one type "a"), windows off unless given."""
    base: dict[str, Any] = {
        "tasks_per_replica": 4,
        "max_replicas": 10,
        "scale_up_stabilization_s": 0.0,
        "scale_down_stabilization_s": 0.0,
    }
    base.update(settings)
    return ScalingPolicy(types=types or (TypePolicy("a"),), **base)


def observation(
    workers: tuple[WorkerObservation, ...] = (),
    schedulers_alive: int | None = 1,
    **types: dict[str, Any],
) -> Observation:
    """``observation(a={"queued": 3})``: type a with 3 queued, at T0."""
    return Observation(
        at=T0,
        types={name: TypeObservation(name, **fields) for name, fields in types.items()},
        workers=workers,
        schedulers_alive=schedulers_alive,
    )


def facts(
    obs: Observation | None = None,
    pol: ScalingPolicy | None = None,
    *,
    current: int = 3,
    history: History | None = None,
    **settings: Any,
) -> Facts:
    pol = pol if pol is not None else policy()
    history = history if history is not None else History.for_policy(pol)
    return Facts(obs, pol, history, T0, current, **settings)


def sizing(**numbers: Any) -> Sizing:
    """A sizing of nothing, but for ``numbers``."""
    fields: dict[str, Any] = {
        "queued": 0,
        "due": 0,
        "active": 0,
        "upcoming": 0,
        "busy_rate": 0.0,
        "busy_pods": 0,
        "all_idle": False,
        "idle_note": "",
        "details": {},
        "stranded_due": 0,
        "capped": 0,
        "cap_note": "",
    }
    fields.update(numbers)
    return Sizing(**fields)


def step(
    replicas: int,
    code: str = ReasonCode.DEMAND,
    why: str = "the sizing",
    *,
    recommendation: int | None = None,
    sized: Sizing | None = None,
) -> Step:
    """A step as the sizing leaves it (the recommendation is the replicas by default)."""
    rec = replicas if recommendation is None else recommendation
    return Step(replicas, code, why, rec, sized if sized is not None else sizing())
