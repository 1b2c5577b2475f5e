"""The busy hold (rules/busy_hold.py): a scale-down keeps the running tasks."""

from __future__ import annotations

from rulefacts import facts, observation, sizing, step

from taskscale.controller.rules import busy_hold
from taskscale.controller.types import ReasonCode


def test_a_scale_down_keeps_the_replicas_the_active_tasks_occupy() -> None:
    held = busy_hold.apply(
        facts(observation(), current=4), step(0, sized=sizing(active=5, busy_pods=1))
    )
    assert (held.replicas, held.code) == (2, ReasonCode.HOLD_ACTIVE)  # ceil(5 / 4)
    assert held.why == "5 tasks active on 1 busy pods: keeping 2"
    pods = busy_hold.apply(
        facts(observation(), current=4), step(1, sized=sizing(active=3, busy_pods=3))
    )
    assert pods.replicas == 3  # one per busy pod


def test_never_above_the_current_replicas_and_never_on_a_scale_up() -> None:
    held = busy_hold.apply(facts(observation(), current=2), step(0, sized=sizing(active=40)))
    assert held.replicas == 2
    up = step(5, sized=sizing(active=40))
    assert busy_hold.apply(facts(observation(), current=2), up) is up
