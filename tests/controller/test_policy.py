"""The scaling policy, one rule per test (pure: no Redis, no Kubernetes)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from support.policy import T0, busy_pod, make_policy, observe, step
from taskscale.controller.policy import RECOMMENDATION, History, decide
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
)

# --- sizing ------------------------------------------------------------------


def test_demand_is_queued_plus_due_plus_active_over_served_types() -> None:
    policy = make_policy("a", "b")
    decision = step(
        policy,
        History(),
        T0,
        0,
        a={"queued": 5, "due": 2, "active": 1},
        b={"queued": 4},
        other={"queued": 100},  # not served by this target
    )
    assert decision.desired == 3  # (5 + 2 + 1 + 4) / 4
    assert decision.reason_code == ReasonCode.DEMAND


@pytest.mark.parametrize("field", ["queued", "due", "active"])
def test_each_of_queued_due_active_counts_as_demand(field: str) -> None:
    decision = step(make_policy(), History(), T0, 0, a={field: 9, "idle_since": T0})
    assert decision.desired == 3  # ceil(9 / 4)


def test_replicas_are_demand_over_tasks_per_replica_rounded_up() -> None:
    assert step(make_policy(), History(), T0, 0, a={"queued": 8}).desired == 2
    assert step(make_policy(), History(), T0, 0, a={"queued": 9}).desired == 3


def test_recommendation_is_clamped_to_max_replicas() -> None:
    decision = step(make_policy(max_replicas=5), History(), T0, 0, a={"queued": 1000})
    assert decision.desired == 5
    assert decision.reason_code == ReasonCode.MAX_REPLICAS


def test_recommendation_is_raised_to_min_replicas() -> None:
    decision = step(make_policy(min_replicas=2), History(), T0, 0, a={"queued": 1})
    assert decision.desired == 2
    assert decision.reason_code == ReasonCode.MIN_REPLICAS


def test_reason_sentence_names_the_numbers_behind_the_decision() -> None:
    decision = step(make_policy(), History(), T0, 0, a={"queued": 15, "due": 1})
    assert (
        decision.reason
        == "0 -> 4: 15 tasks queued, 1 due, 0 active need 4 replicas (4 per replica)"
    )


# --- rate floor ---------------------------------------------------------------


def _drain_as_fast_as_fill(
    policy: ScalingPolicy, *, before: dict[str, Any], after: dict[str, Any]
) -> Decision:
    history = History(sample_every_s=0)
    step(policy, history, T0, 5, a={"active": 4, "idle_since": T0, **before})
    return step(policy, history, T0 + 30, 5, a={"active": 2, "idle_since": T0 + 30, **after})


def test_rate_floor_keeps_workers_when_queue_drains_as_fast_as_it_fills() -> None:
    # 300 tasks arrived and finished in 30 s (10/s) taking 2 s each: 20 busy on
    # average, 5 replicas of 4 -- although this instant shows only 2 active.
    decision = _drain_as_fast_as_fill(
        make_policy(),
        before={"claimed_total": 1000, "completed_total": 1000, "service_ms_total": 2_000_000},
        after={"claimed_total": 1300, "completed_total": 1300, "service_ms_total": 2_600_000},
    )
    assert decision.desired == 5
    assert decision.details["arrival_per_s:a"] == pytest.approx(10.0)
    assert decision.details["service_s:a"] == pytest.approx(2.0)


def test_rate_floor_reads_a_counter_reset_as_a_restart_from_zero() -> None:
    # Redis restarted: the counters went down.  The increase since the reset is
    # the new value (300 in 30 s), never a negative rate.
    decision = _drain_as_fast_as_fill(
        make_policy(),
        before={"claimed_total": 90_000, "completed_total": 90_000, "service_ms_total": 9_000_000},
        after={"claimed_total": 300, "completed_total": 300, "service_ms_total": 600_000},
    )
    assert decision.desired == 5
    assert decision.details["arrival_per_s:a"] == pytest.approx(10.0)


def test_rate_floor_counts_growth_of_the_backlog_as_arrivals() -> None:
    # 116 claimed and the queue grew by 4 in 30 s: 4 arrivals/s, 2 s each = 8 busy.
    history = History(sample_every_s=0)
    step(make_policy(), history, T0, 1, a={"active": 1, "idle_since": T0})
    grown = step(
        make_policy(),
        history,
        T0 + 30,
        1,
        a={
            "queued": 4,
            "idle_since": T0 + 30,
            "claimed_total": 116,
            "completed_total": 116,
            "service_ms_total": 232_000,
        },
    )
    assert grown.details["arrival_per_s:a"] == pytest.approx(4.0)  # (116 + 4) / 30
    assert grown.desired == 2  # 4/s x 2 s = 8 busy; the 4 queued alone would need 1


def test_rate_floor_is_not_applied_to_types_idle_past_threshold() -> None:
    policy = make_policy(idle_s=10)
    history = History(sample_every_s=0)
    step(policy, history, T0, 5, a={"idle_since": T0})
    decision = step(
        policy,
        history,
        T0 + 30,
        5,
        a={
            "idle_since": T0 + 5,
            "claimed_total": 300,
            "completed_total": 300,
            "service_ms_total": 600_000,
        },
    )
    assert decision.desired == 0
    assert decision.reason_code == ReasonCode.IDLE


# --- look-ahead ----------------------------------------------------------------


def test_lookahead_counts_delayed_tasks_due_within_warmup_lead() -> None:
    # Nothing to do now, the type never ran: only the schedule says work is coming.
    decision = step(make_policy(), History(), T0, 0, a={"upcoming": 40})
    assert decision.desired == 10
    assert decision.reason_code == ReasonCode.LOOKAHEAD


def test_lookahead_adds_to_current_demand() -> None:
    decision = step(make_policy(), History(), T0, 0, a={"queued": 4, "upcoming": 4})
    assert decision.desired == 2


# --- idle rule ------------------------------------------------------------------


def test_scales_to_min_only_when_every_type_idle_past_threshold() -> None:
    policy = ScalingPolicy(
        types=(TypePolicy("a", idle_threshold_s=300), TypePolicy("b", idle_threshold_s=60)),
        tasks_per_replica=4,
        scale_down_stabilization_s=0,
    )
    history = History()
    # b is idle past its 60 s, a only 100 s of its 300 s: not to zero yet.
    early = step(policy, history, T0, 3, a={"idle_since": T0 - 100}, b={"idle_since": T0 - 400})
    assert early.desired == 1
    assert early.reason_code == ReasonCode.WAITING_IDLE
    late = step(
        policy, history, T0 + 201, 3, a={"idle_since": T0 - 100}, b={"idle_since": T0 - 400}
    )
    assert late.desired == 0
    assert late.reason_code == ReasonCode.IDLE
    assert late.reason == "3 -> 0: all types idle past their thresholds (60-300 s)"


def test_waiting_for_idle_keeps_one_replica_warm_not_the_whole_fleet() -> None:
    policy = make_policy(idle_s=300)
    waiting = step(policy, History(), T0, 8, a={"idle_since": T0 - 10})
    assert waiting.desired == 1
    assert waiting.reason_code == ReasonCode.WAITING_IDLE
    assert step(policy, History(), T0, 0, a={"idle_since": T0 - 10}).desired == 0


def test_idle_scale_down_goes_to_min_replicas_not_zero() -> None:
    decision = step(make_policy(min_replicas=2), History(), T0, 6, a={"idle_since": T0 - 301})
    assert decision.desired == 2
    assert decision.reason_code == ReasonCode.IDLE


def test_idle_reason_sentence() -> None:
    decision = step(make_policy(), History(), T0, 3, a={"idle_since": T0 - 400})
    assert decision.reason == "3 -> 0: all types idle for 300 s"


def test_never_seen_type_is_idle() -> None:
    # b is in the policy but has never completed a task (and is absent from the
    # observation altogether); c has a record but no IDLE_SINCE yet.
    policy = make_policy("a", "b", "c")
    decision = step(policy, History(), T0, 3, a={"idle_since": T0 - 400}, c={})
    assert decision.desired == 0
    assert decision.reason_code == ReasonCode.IDLE


def test_queued_work_of_a_type_with_old_idle_since_is_not_idle() -> None:
    decision = step(make_policy(), History(), T0, 0, a={"queued": 1, "idle_since": T0 - 9999})
    assert decision.desired == 1


# --- never kill running work --------------------------------------------------


def test_never_scales_to_zero_while_tasks_active() -> None:
    # IDLE_SINCE is stale (the last completion was long ago) but a long task runs.
    decision = step(make_policy(), History(), T0, 3, a={"active": 1, "idle_since": T0 - 9999})
    assert decision.desired == 1
    assert decision.reason_code == ReasonCode.HOLD_ACTIVE


def test_scale_down_keeps_every_pod_that_runs_a_task() -> None:
    # 3 tasks would fit one replica, but they run on three pods: removing two of
    # them would interrupt tasks, so only the idle fourth pod goes.
    workers = (*(busy_pod(f"p{i}", 1) for i in range(3)), busy_pod("p3", 0))
    obs = observe(T0, workers=workers, a={"active": 3, "idle_since": T0})
    decision = step(make_policy(), History(), T0, 4, observation=obs)
    assert decision.desired == 3
    assert decision.reason_code == ReasonCode.HOLD_ACTIVE


def test_busy_pods_never_cause_a_scale_up() -> None:
    workers = tuple(busy_pod(f"p{i}", 1) for i in range(3))
    obs = observe(T0, workers=workers, a={"active": 3, "idle_since": T0})
    assert step(make_policy(), History(), T0, 1, observation=obs).desired == 1


# --- stabilization and steps ----------------------------------------------------


def test_scale_down_stabilization_uses_highest_recent_recommendation() -> None:
    policy = make_policy(scale_down_stabilization_s=60)
    history = History()
    assert step(policy, history, T0, 5, a={"queued": 20}).desired == 5
    held = step(policy, history, T0 + 30, 5, a={"queued": 12})
    assert held.desired == 5
    assert held.reason_code == ReasonCode.STABILIZING
    assert held.details[RECOMMENDATION] == 3
    assert step(policy, history, T0 + 50, 5, a={"queued": 4}).desired == 5
    # t=0's 5 has left the window; t=30's 3 is now the highest.
    assert step(policy, history, T0 + 70, 5, a={"queued": 4}).desired == 3
    assert step(policy, history, T0 + 100, 3, a={"queued": 4}).desired == 1


def test_idle_scale_to_min_respects_scale_down_window() -> None:
    policy = make_policy(idle_s=10, scale_down_stabilization_s=60)
    history = History()
    step(policy, history, T0, 2, a={"active": 8, "idle_since": T0 - 5})
    held = step(policy, history, T0 + 20, 2, a={"idle_since": T0 + 1})
    assert held.desired == 2
    assert held.reason_code == ReasonCode.STABILIZING
    assert step(policy, history, T0 + 61, 2, a={"idle_since": T0 + 1}).desired == 0


def test_scale_up_stabilization() -> None:
    policy = make_policy(scale_up_stabilization_s=30)
    history = History()
    assert step(policy, history, T0, 1, a={"queued": 4}).desired == 1
    held = step(policy, history, T0 + 10, 1, a={"queued": 20})
    assert held.desired == 1
    assert held.reason_code == ReasonCode.STABILIZING
    # Every recommendation of the last 30 s is now at least 5.
    assert step(policy, history, T0 + 31, 1, a={"queued": 20}).desired == 5


def test_scale_up_without_window_is_immediate() -> None:
    history = History()
    step(make_policy(), history, T0, 1, a={"queued": 4})
    assert step(make_policy(), history, T0 + 1, 1, a={"queued": 20}).desired == 5


def test_step_size_bounded() -> None:
    up = make_policy(max_scale_up_step=2)
    decision = step(up, History(), T0, 1, a={"queued": 40})
    assert decision.desired == 3
    assert decision.reason_code == ReasonCode.STEP_LIMIT
    down = make_policy(max_scale_down_step=1)
    assert step(down, History(), T0, 5, a={"idle_since": T0 - 400}).desired == 4


# --- fail-static -----------------------------------------------------------------


def test_fail_static_holds_current_when_observation_missing() -> None:
    policy = make_policy(scale_down_stabilization_s=0)
    history = History()
    for i in range(20):  # far past every idle threshold, still no data: hold
        decision = step_missing(policy, history, T0 + 100 * i, current=5)
        assert decision.desired == 5
        assert decision.reason_code == ReasonCode.FAIL_STATIC
    assert len(history) == 0  # a missing read recommends nothing


def step_missing(policy: ScalingPolicy, history: History, at: float, *, current: int) -> Decision:
    decision = decide(None, policy, history, now=at, current=current)
    history.record(at, None, decision)
    return decision


# --- history ---------------------------------------------------------------------


def test_history_forgets_entries_older_than_its_max_age() -> None:
    history = History(max_age_s=60, sample_every_s=0)
    policy = make_policy()
    for i in range(500):
        step(policy, history, T0 + i, 1, a={"active": 1})
    assert len(history) == 61
    assert history.oldest_sample_since(0) is not None
    assert history.oldest_sample_since(0).at == T0 + 439  # type: ignore[union-attr]


def test_history_for_policy_covers_its_longest_window() -> None:
    policy = replace(make_policy(), scale_down_stabilization_s=900, rate_window_s=60)
    assert History.for_policy(policy).max_age_s >= 900


def test_many_types_are_summed() -> None:
    names = [f"t{i}" for i in range(1000)]
    policy = make_policy(*names, max_replicas=1000)
    obs = Observation(T0, {n: TypeObservation(n, queued=2, idle_since=T0) for n in names})
    assert step(policy, History(), T0, 0, observation=obs).desired == 500


# --- the policy in the simulated world (bench/simulate.py, shortened) -------------


def test_policy_in_simulation_never_interrupts_a_task_where_the_baseline_does() -> None:
    from bench.sim_trace import TraceSettings, make_trace
    from bench.sim_world import WorldSettings
    from bench.simulate import VARIANTS, run

    trace = make_trace(0, TraceSettings(duration_s=900.0, spikes_at=(400.0,)))
    settings = WorldSettings(tail_s=300.0)
    ours, _ = run(trace, VARIANTS["taskscale"](), settings)
    keda, _ = run(trace, VARIANTS["KEDA-like"](), settings)
    assert ours.never_claimed == 0
    assert ours.interrupted == 0
    assert keda.interrupted > 0  # the same world does interrupt a busy-blind scale-down


# --- no scheduler alive ------------------------------------------------------------


def test_due_delayed_tasks_are_not_demand_when_no_scheduler_is_alive() -> None:
    policy = make_policy("a", idle_s=10)
    stranded = replace(observe(T0, a={"due": 8, "idle_since": T0 - 3600}), schedulers_alive=0)
    decision = step(policy, History(), T0, 2, observation=stranded)
    assert decision.desired == 0  # idle: no worker could claim those tasks
    assert "8 due delayed task(s) not counted: no scheduler is alive" in decision.reason


def test_due_delayed_tasks_are_demand_while_a_scheduler_lives_or_when_unknown() -> None:
    policy = make_policy("a", idle_s=10)
    for alive in (1, None):
        obs = replace(observe(T0, a={"due": 8, "idle_since": T0 - 3600}), schedulers_alive=alive)
        decision = step(policy, History(), T0, 0, observation=obs)
        assert decision.desired == 2, alive  # 8 / 4
        assert "not counted" not in decision.reason


def test_queued_work_still_counts_without_a_scheduler() -> None:
    obs = replace(observe(T0, a={"queued": 4, "due": 8}), schedulers_alive=0)
    assert step(make_policy("a"), History(), T0, 0, observation=obs).desired == 1
