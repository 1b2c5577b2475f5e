"""The stabilization rule's drain cap (rules/stabilization.py): a scale-up the
drain hold lets through asks for no more pods than keep up with the arrivals
and clear the backlog within a pod's start (half the warm-up lead) -- a pod
asked for beyond that would be up after the queue is gone."""

from __future__ import annotations

from rulefacts import T0, facts, observation, policy, sizing

from taskscale.controller.history import History
from taskscale.controller.rules import stabilization
from taskscale.controller.rules.base import Step
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    TypeObservation,
    WorkerObservation,
)

#: warm-up lead 20 s: the hold allows a backlog cleared within 5 s, the cap
#: sizes for one cleared within a pod's start, 10 s
POLICY = policy(warmup_lead_s=20.0, max_replicas=30)


def workers(n: int, busy: int = 4) -> tuple[WorkerObservation, ...]:
    return tuple(WorkerObservation(f"w{i}", f"pod-{i}", ("a",), 4, busy) for i in range(n))


def up(
    to: int, queued: int, *, service_s: float = 1.0, busy_rate: float = 4.0, **more: object
) -> Step:
    """The sizing rule's scale-up to ``to`` for ``queued`` tasks."""
    details = {"service_s:a": service_s} if service_s else {}
    numbers = {"queued": queued, "active": 8, "busy_rate": busy_rate, "details": details}
    numbers.update(more)
    return Step(to, ReasonCode.DEMAND, "the sizing", to, sizing(**numbers))


def test_a_scale_up_is_capped_at_the_pods_that_clear_the_backlog_within_a_start() -> None:
    # 2 busy pods; 100 queued x 1 s: 4 threads for the arrivals + 100 / 10 s = 14
    # threads = 4 pods (of 4), not the 27 the count of tasks asks for
    capped = stabilization.apply(facts(observation(workers(2)), POLICY, current=2), up(27, 100))
    assert (capped.replicas, capped.code) == (4, ReasonCode.STABILIZING)
    assert capped.why == (
        "the sizing; capped at 4: 4.0 threads keep up with the arrivals "
        "and 100 tasks clear within a pod's start (10 s)"
    )
    assert capped.recommendation == 27  # the windows remember what the sizing asked
    # twice the service time, twice the threads for the backlog: 4 + 20 = 24 -> 6
    slow = stabilization.apply(
        facts(observation(workers(2)), POLICY, current=2), up(27, 100, service_s=2.0, busy_rate=4.0)
    )
    assert slow.replicas == 6


def test_the_cap_never_lowers_below_current_or_min_nor_raises_the_step() -> None:
    obs = observation(workers(2))
    # 3 busy pods, 70 queued (5.8 s: not held): 4 + 70 / 10 = 11 threads -> 3 pods
    kept = stabilization.apply(facts(observation(workers(3)), POLICY, current=3), up(9, 70))
    assert kept.replicas == 3 and "capped at 3" in kept.why
    with_min = policy(warmup_lead_s=20.0, max_replicas=30, min_replicas=5)
    # 4 + 60 / 10 = 10 threads -> 3 pods, raised to minReplicas
    assert stabilization.apply(facts(obs, with_min, current=2), up(9, 60)).replicas == 5
    given = up(5, 200)  # 4 + 200 / 10 = 24 threads = 6 pods > the 5 asked
    assert stabilization.apply(facts(obs, POLICY, current=2), given) is given


def test_with_no_service_time_in_the_window_the_lifetime_mean_counts() -> None:
    lifetime = {"completed_total": 90, "failed_total": 10, "service_ms_total": 200_000}  # 2 s
    obs = observation(workers(2), a=lifetime)
    capped = stabilization.apply(facts(obs, POLICY, current=2), up(27, 100, service_s=0.0))
    assert capped.replicas == 6  # 4 + 100 x 2 s / 10 s = 24 threads
    # never finished a task: nothing known, nothing capped
    given = up(27, 100, service_s=0.0)
    assert stabilization.apply(facts(observation(workers(2)), POLICY, current=2), given) is given


def history_with(before: Observation, ago_s: float) -> History:
    history = History(max_age_s=600.0, sample_every_s=0.0)
    history.record(T0 - ago_s, before, Decision(2, ReasonCode.DEMAND, "..."))
    return history


def at(t: float, **fields: int) -> Observation:
    return Observation(at=t, types={"a": TypeObservation("a", **fields)}, workers=workers(2))


def test_recent_arrivals_raise_the_cap_when_the_rate_floor_lags() -> None:
    # 5 s ago 20 queued, 0 claimed; now 60 queued, 20 claimed: 60 arrived, 12/s
    # x 1 s = 12 threads (the rate floor's minute says 4) + 60 / 10 = 18 -> 5 pods
    now = at(T0, queued=60, claimed_total=20)
    history = history_with(at(T0 - 5, queued=20), ago_s=5)
    capped = stabilization.apply(facts(now, POLICY, current=2, history=history), up(27, 60))
    assert capped.replicas == 5 and "12.0 threads keep up with the arrivals" in capped.why
    # without the history: the rate floor's 4 threads + 6 = 10 -> 3 pods
    assert stabilization.apply(facts(now, POLICY, current=2), up(27, 60)).replicas == 3


def test_a_foreseen_batch_coming_due_is_not_an_arrival() -> None:
    # 5 s ago 200 delayed tasks were upcoming; now they are queued: no new load
    now = at(T0, queued=200, upcoming=0)
    history = history_with(at(T0 - 5, queued=0, upcoming=200), ago_s=5)
    capped = stabilization.apply(facts(now, POLICY, current=2, history=history), up(30, 200))
    assert capped.replicas == 6  # 4 + 200 / 10 = 24 threads, not 40/s of arrivals


def test_too_little_history_or_a_paused_type_gives_no_recent_rate() -> None:
    now = at(T0, queued=60, claimed_total=20)
    recent = history_with(at(T0 - 1, queued=20), ago_s=1)  # 1 s: too little
    assert (
        stabilization.apply(facts(now, POLICY, current=2, history=recent), up(27, 60)).replicas == 3
    )
    paused = Observation(
        at=T0,
        types={"a": TypeObservation("a", queued=60, claimed_total=20, paused=True)},
        workers=workers(2),
    )
    history = history_with(at(T0 - 5, queued=20), ago_s=5)
    capped = stabilization.apply(facts(paused, POLICY, current=2, history=history), up(27, 60))
    assert capped.replicas == 3


def test_a_pre_warm_from_zero_is_capped_and_a_cold_start_is_not() -> None:
    lifetime = {"completed_total": 10, "service_ms_total": 10_000}  # 1 s
    # 200 delayed tasks due within the lead, nothing queued: 200 / 10 s = 20
    # threads = 5 pods warm, not the 30 one thread per task asks for
    prewarm = up(30, 0, upcoming=200, busy_rate=0.0, active=0, service_s=0.0)
    capped = stabilization.apply(facts(observation(a=lifetime), POLICY, current=0), prewarm)
    assert capped.replicas == 5 and "200 tasks clear within a pod's start" in capped.why
    cold = up(30, 120, busy_rate=0.0, active=0)  # queued at zero: its first tasks wait
    assert stabilization.apply(facts(observation(a=lifetime), POLICY, current=0), cold) is cold


def test_a_queue_wait_scale_up_is_never_capped() -> None:
    wait = up(27, 100).to(27, ReasonCode.QUEUE_WAIT, "the oldest task waits")
    assert stabilization.apply(facts(observation(workers(2)), POLICY, current=2), wait) is wait


def measured(start_s: float) -> History:
    """A history that measured one pod start of ``start_s``."""
    history = History(max_age_s=600.0, sample_every_s=0.0)
    history.record(T0 - 30, observation(workers(2)), Decision(2, ReasonCode.STEADY, "..."))
    history.record(T0 - 29, observation(workers(2)), Decision(3, ReasonCode.DEMAND, "..."))
    history.record(
        T0 - 29 + start_s, observation(workers(3)), Decision(3, ReasonCode.STEADY, "...")
    )
    return history


def test_a_measured_start_shorter_than_half_the_lead_is_the_start() -> None:
    assert measured(4.0).pod_start_s() == 4.0
    # 4 threads for the arrivals + 100 tasks / 4 s = 29 threads -> 8 pods
    fast = facts(observation(workers(2)), POLICY, current=2, history=measured(4.0))
    capped = stabilization.apply(fast, up(27, 100))
    assert capped.replicas == 8 and capped.why.endswith("within a pod's start (4 s)")
    # a slower measured start than half the lead does not lengthen it: 10 s
    slow = facts(observation(workers(2)), POLICY, current=2, history=measured(15.0))
    assert stabilization.apply(slow, up(27, 100)).replicas == 4
