"""The stabilization rule's drain hold (rules/stabilization.py): no scale-up
for a backlog the ready workers clear before a new pod could start.  A
scale-up the hold lets through meets the drain cap (test_rule_drain_cap.py):
here, "not held" is a step that does not end "held at N"."""

from __future__ import annotations

from rulefacts import facts, observation, policy, sizing

from taskscale.controller.rules import stabilization
from taskscale.controller.rules.base import Step
from taskscale.controller.types import ReasonCode, WorkerObservation

#: warm-up lead 20 s: the hold allows a backlog cleared within 5 s
POLICY = policy(warmup_lead_s=20.0)


def workers(n: int, busy: int = 4) -> tuple[WorkerObservation, ...]:
    return tuple(WorkerObservation(f"w{i}", f"pod-{i}", ("a",), 4, busy) for i in range(n))


def up(queued: int, *, service_s: float = 1.0, busy_rate: float = 4.0, **more: object) -> Step:
    """The sizing rule's scale-up to 5 for ``queued`` tasks."""
    details = {"service_s:a": service_s} if service_s else {}
    numbers = {"queued": queued, "active": 8, "busy_rate": busy_rate, "details": details}
    numbers.update(more)
    return Step(5, ReasonCode.DEMAND, "the sizing", 5, sizing(**numbers))


def test_a_backlog_the_ready_threads_clear_in_time_holds_the_replicas() -> None:
    # 2 pods, 8 threads all busy; 30 queued x 1 s / 8 threads = 3.75 s <= 5 s
    held = stabilization.apply(facts(observation(workers(2)), POLICY, current=2), up(30))
    assert (held.replicas, held.code) == (2, ReasonCode.STABILIZING)
    assert held.why == (
        "the sizing; held at 2: their 8 threads clear the backlog in 3.8 s, "
        "before a new pod could start (5 s)"
    )
    # free threads take their share first: 34 queued, 4 of 8 threads free -> 3.75 s
    held = stabilization.apply(facts(observation(workers(2, busy=2)), POLICY, current=2), up(34))
    assert held.replicas == 2


def not_held(step: Step, current: int) -> bool:
    """The hold let ``step`` through: it scales up (the cap may lower it)."""
    return step.replicas > current and "held at" not in step.why


def test_a_backlog_longer_than_a_pod_start_scales_up() -> None:
    given = up(41)  # 41 x 1 s / 8 = 5.1 s > 5 s
    assert not_held(
        stabilization.apply(facts(observation(workers(2)), POLICY, current=2), given), 2
    )
    given = up(30, upcoming=20)  # delayed tasks due within the lead count as backlog
    assert not_held(
        stabilization.apply(facts(observation(workers(2)), POLICY, current=2), given), 2
    )


def test_no_hold_when_arrivals_alone_need_more_or_nothing_is_known() -> None:
    obs, two = observation(workers(2)), {"current": 2}
    cases = {
        "the rate floor asks for 3": up(10, busy_rate=9.0),
        "no service time measured yet": up(10, service_s=0.0),
    }
    for name, given in cases.items():
        assert stabilization.apply(facts(obs, POLICY, **two), given) is given, name
    given = up(10)
    assert stabilization.apply(facts(obs, POLICY, current=0), given) is given, "from zero"
    assert stabilization.apply(facts(None, POLICY, **two), given) is given, "Redis unread"
    queue_wait = given.to(5, ReasonCode.QUEUE_WAIT, "the oldest task waits")
    assert stabilization.apply(facts(obs, POLICY, **two), queue_wait) is queue_wait


def test_pods_still_starting_count_at_tasks_per_replica() -> None:
    # 4 replicas, 2 of them ready (8 threads, busy): 16 threads once all are up
    # 60 queued x 1 s / 16 = 3.75 s: held; with only the ready 8 it would be 7.5 s
    held = stabilization.apply(facts(observation(workers(2)), POLICY, current=4), up(60))
    assert held.replicas == 4 and "their 16 threads clear the backlog in 3.8 s" in held.why
    given = up(61 + 8)  # 69 x 1 s / 16 = 4.3 s: still held; 90 is not
    assert (
        stabilization.apply(facts(observation(workers(2)), POLICY, current=4), given).replicas == 4
    )
    given = up(90, busy_rate=8.0)  # 90 x 1 s / 16 = 5.6 s: not held
    assert not_held(
        stabilization.apply(facts(observation(workers(2)), POLICY, current=4), given), 4
    )
    # no pod ready yet: the starting ones alone
    held = stabilization.apply(facts(observation(), POLICY, current=2), up(10))
    assert held.replicas == 2 and "their 8 threads" in held.why


def test_a_starting_pod_counts_as_the_ready_ones_not_an_overstated_tasks_per_replica() -> None:
    overstated = policy(warmup_lead_s=20.0, tasks_per_replica=16)
    # 2 ready pods of 4 threads, 4 replicas: 16 threads (not 8 + 2 x 16 = 40)
    obs = observation(workers(2))
    given = up(81, busy_rate=12.0)  # 81 x 1 s / 16 = 5.06 s: not held
    assert not_held(stabilization.apply(facts(obs, overstated, current=4), given), 4)
    held = stabilization.apply(facts(obs, overstated, current=4), up(80))
    assert held.replicas == 4 and "their 16 threads" in held.why


def test_the_scale_up_window_applies_first_then_the_hold() -> None:
    from taskscale.controller.history import History
    from taskscale.controller.types import Decision

    pol = policy(warmup_lead_s=20.0, scale_up_stabilization_s=30.0)
    history = History(max_age_s=600.0, sample_every_s=0.0)
    obs = observation(workers(2))
    history.record(obs.at - 5, obs, Decision(4, ReasonCode.DEMAND, "..."))
    held = stabilization.apply(facts(obs, pol, current=2, history=history), up(30))
    assert held.replicas == 2 and "held to 4 by the 30 s scale-up window" in held.why
    assert held.why.endswith("before a new pod could start (5 s)")
