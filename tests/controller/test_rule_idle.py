"""The idle rule (rules/idle.py): min only once every type is idle."""

from __future__ import annotations

from rulefacts import facts, observation, policy, sizing, step

from taskscale.controller.rules import idle
from taskscale.controller.types import ReasonCode


def test_every_type_idle_goes_to_min_and_keeps_the_raw_recommendation() -> None:
    pol = policy(min_replicas=1)
    went = idle.apply(facts(observation(), pol), step(0, sized=sizing(all_idle=True)))
    assert (went.replicas, went.code, went.why) == (1, ReasonCode.IDLE, "all types idle for 300 s")
    assert went.recommendation == 0  # what the windows remember is the sizing's


def test_one_replica_stays_warm_while_a_type_is_inside_its_threshold() -> None:
    waiting = sizing(idle_note="'a' idle 100 s of 300 s")
    kept = idle.apply(facts(observation(), current=5), step(0, sized=waiting))
    assert (kept.replicas, kept.code) == (1, ReasonCode.WAITING_IDLE)
    assert kept.why == "nothing to do; keeping 1 until every type is idle ('a' idle 100 s of 300 s)"


def test_work_left_means_the_rule_has_nothing_to_say() -> None:
    given = step(2, sized=sizing(queued=1, all_idle=True))
    assert idle.apply(facts(observation()), given) is given
