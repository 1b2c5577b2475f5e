"""The policy's flow-control rule (pure): a type capped at K running never asks
for more than ceil(K / tasksPerReplica) replicas, and a rate-limited type's
rate floor never counts more claims than its limit allows."""

from __future__ import annotations

from support.policy import T0, make_policy, step
from taskscale.controller.policy import History


def test_a_capped_type_asks_for_no_more_than_its_cap_allows() -> None:
    policy = make_policy(max_replicas=50)  # 4 tasks per replica
    decision = step(
        policy, History(), T0, 5, a={"queued": 500, "active": 20, "concurrency_limit": 20}
    )
    assert decision.desired == 5  # 20 / 4, not (500 + 20) / 4 = 130 -> 50
    assert decision.reason == (
        "5 -> 5: 0 tasks queued, 0 due, 20 active need 5 replicas (4 per replica); "
        "500 more waiting beyond a concurrency cap ('a' runs at most 20: 5 replicas at most)"
    )


def test_the_cap_counts_waiting_tasks_up_to_it_and_other_types_in_full() -> None:
    policy = make_policy("a", "b", max_replicas=50)
    decision = step(
        policy,
        History(),
        T0,
        0,
        a={"queued": 100, "upcoming": 7, "concurrency_limit": 6},
        b={"queued": 10},
    )
    assert decision.desired == 4  # a: 6 of its 107, b: 10 -> 16 / 4


def test_an_uncapped_type_is_sized_as_before() -> None:
    decision = step(make_policy(max_replicas=50), History(), T0, 0, a={"queued": 500})
    assert decision.desired == 50 and "concurrency cap" not in decision.reason


def _steady(**limits: object) -> int:
    # 300 claimed in 30 s (10/s) at 2 s each: 20 tasks busy by Little's law
    policy, history = make_policy(max_replicas=50), History(sample_every_s=0)
    before = {"claimed_total": 1000, "completed_total": 1000, "service_ms_total": 2_000_000}
    after = {"claimed_total": 1300, "completed_total": 1300, "service_ms_total": 2_600_000}
    step(policy, history, T0, 5, a={"active": 4, "idle_since": T0, **before, **limits})
    decision = step(
        policy, history, T0 + 30, 5, a={"active": 2, "idle_since": T0 + 30, **after, **limits}
    )
    return decision.desired


def test_the_rate_floor_of_a_capped_type_stops_at_its_cap() -> None:
    assert _steady() == 5  # 20 busy / 4
    assert _steady(concurrency_limit=8) == 2  # at most 8 busy


def test_the_rate_floor_of_a_rate_limited_type_counts_at_most_its_rate() -> None:
    assert _steady(rate_limit_per_s=5.0) == 3  # 5/s x 2 s = 10 busy -> 3 replicas
