"""The queue-wait rule (rules/queue_wait.py), alone: it raises the
recommendation in proportion to the replicas working."""

from __future__ import annotations

from rulefacts import facts, observation, policy, sizing, step

from taskscale.controller.rules import queue_wait
from taskscale.controller.types import ReasonCode, TypeObservation, TypePolicy

WAITED = policy(TypePolicy("a", max_queue_wait_s=20.0))


def test_a_wait_three_times_the_target_asks_three_times_the_working_replicas() -> None:
    obs = observation(a={"queued": 5, "oldest_ready_s": 60.0})
    raised = queue_wait.apply(facts(obs, WAITED, current=2), step(2, sized=sizing(busy_pods=2)))
    assert (raised.replicas, raised.recommendation, raised.code) == (6, 6, ReasonCode.QUEUE_WAIT)
    assert raised.why == (
        "the sizing; the oldest 'a' task has waited 60 s, over its 20 s target: "
        "6 replicas (2 working x 3.0)"
    )


def test_within_the_target_or_at_the_fleet_wide_cap_it_changes_nothing() -> None:
    given = step(2, sized=sizing(busy_pods=2))
    calm = observation(a={"queued": 5, "oldest_ready_s": 10.0})
    assert queue_wait.apply(facts(calm, WAITED), given) is given
    capped = observation(
        a={"queued": 5, "oldest_ready_s": 60.0, "active": 2, "concurrency_limit": 2}
    )
    assert queue_wait.apply(facts(capped, WAITED), given) is given


def test_a_due_task_waits_only_while_a_scheduler_can_promote_it() -> None:
    due = TypeObservation("a", oldest_due_s=50.0, oldest_ready_s=5.0)
    assert queue_wait.oldest_wait(due, scheduler_alive=True) == 50.0
    assert queue_wait.oldest_wait(due, scheduler_alive=False) == 5.0
