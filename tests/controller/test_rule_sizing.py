"""The sizing rule (rules/sizing.py): tasks -> the raw recommendation."""

from __future__ import annotations

from rulefacts import facts, observation, policy, step

from taskscale.controller.rules import sizing
from taskscale.controller.types import ReasonCode, TypePolicy


def test_demand_starts_the_recommendation_and_leaves_its_sums_on_the_step() -> None:
    sized = sizing.apply(facts(observation(a={"queued": 9, "active": 2})), step(0))
    assert (sized.replicas, sized.recommendation, sized.code) == (3, 3, ReasonCode.DEMAND)
    assert sized.why == "9 tasks queued, 0 due, 2 active need 3 replicas (4 per replica)"
    assert sized.sizing is not None and (sized.sizing.queued, sized.sizing.active) == (9, 2)


def test_types_are_summed_and_clamped_to_max_replicas() -> None:
    pol = policy(TypePolicy("a"), TypePolicy("b"), max_replicas=4)
    sized = sizing.apply(facts(observation(a={"queued": 20}, b={"due": 20}), pol), step(0))
    assert (sized.replicas, sized.code) == (4, ReasonCode.MAX_REPLICAS)
    assert sized.why.endswith("need 10 replicas (4 per replica), capped at maxReplicas")


def test_due_tasks_with_no_scheduler_alive_are_not_demand() -> None:
    obs = observation(schedulers_alive=0, a={"due": 8, "queued": 1})
    sized = sizing.apply(facts(obs), step(0))
    assert sized.replicas == 1
    assert sized.sizing is not None and sized.sizing.stranded_due == 8


def test_without_an_observation_there_is_nothing_to_size() -> None:
    given = step(2)
    assert sizing.apply(facts(None), given) is given
