"""The per-pass shortcuts of the rules (issue 28) give what the plain
definitions give, on random observations: sizing's inline arrivals (the rate
floor and its details), the drain cap's service time (no scan of empty
details, the lifetime loop) and the pause rule's all-types-paused check.

The reference functions below are the definitions as they read before the
shortcuts (0.1.0's shape): a shortcut that drops a case fails here."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from taskscale.controller.history import History
from taskscale.controller.rules import pause, sizing, stabilization
from taskscale.controller.rules.base import Facts
from taskscale.controller.types import (
    Decision,
    Observation,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
)

T0 = 1_763_750_000.0
NAMES = ("a", "b", "c", "d")

_counts = st.integers(min_value=0, max_value=8)
_totals = st.integers(min_value=0, max_value=40)  # small: arrivals near 0 and 1


@st.composite
def type_observations(draw: st.DrawFn, name: str) -> TypeObservation:
    return TypeObservation(
        name,
        queued=draw(_counts),
        due=draw(_counts),
        upcoming=draw(_counts),
        active=draw(_counts),
        idle_since=draw(st.none() | st.floats(min_value=T0 - 600, max_value=T0)),
        claimed_total=draw(_totals),
        completed_total=draw(_totals),
        failed_total=draw(st.integers(min_value=0, max_value=5)),
        service_ms_total=draw(_totals),
        concurrency_limit=draw(st.none() | st.integers(min_value=1, max_value=20)),
        rate_limit_per_s=draw(st.none() | st.floats(min_value=0.5, max_value=50)),
        paused=draw(st.booleans()),
    )


@st.composite
def observations(draw: st.DrawFn, at: float) -> Observation:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES)))
    return Observation(
        at=at,
        types={n: draw(type_observations(n)) for n in names},
        schedulers_alive=draw(st.sampled_from((None, 0, 1))),
    )


@st.composite
def policies(draw: st.DrawFn) -> ScalingPolicy:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=4))
    types = tuple(
        TypePolicy(n, idle_threshold_s=draw(st.sampled_from((0, 30, 300)))) for n in names
    )
    return ScalingPolicy(types=types, tasks_per_replica=draw(st.integers(1, 8)), max_replicas=50)


def _ref_type_rate(
    name: str, obs: TypeObservation, ready: int, old: TypeObservation | None, dt: float
) -> tuple[float, dict[str, float]]:
    old = old if old is not None else TypeObservation(task_type="")
    claimed = obs.claimed_total - old.claimed_total
    if claimed < 0:
        claimed = obs.claimed_total
    arrivals = claimed + ready - (old.queued + old.due)
    finished = sizing._increase(
        old.completed_total + old.failed_total, obs.completed_total + obs.failed_total
    )
    if arrivals <= 0 or finished == 0:
        return 0.0, {}
    service_s = sizing._increase(old.service_ms_total, obs.service_ms_total) / (1000.0 * finished)
    rate = min(arrivals / dt, obs.rate_limit_per_s or math.inf)
    details = {"arrival_per_s:" + name: rate, "service_s:" + name: service_s}
    return min(rate * service_s, obs.concurrency_limit or math.inf), details


def _ref_rates(
    obs: Observation, old: Observation, policy: ScalingPolicy
) -> tuple[float, dict[str, float]]:
    """The rate floor's sum and details: every type that is not idle or paused."""
    alive = obs.schedulers_alive != 0
    busy_rate, details = 0.0, {}
    for tp in policy.types:
        t = obs.types.get(tp.name, TypeObservation(task_type=""))
        q, d = (0, 0) if t.paused else (t.queued, t.due if alive else 0)
        idle = t.idle_since is None or tp.idle_threshold_s - (obs.at - t.idle_since) <= 0
        if t.paused or (idle and not (q or d or t.active)):
            continue
        rate, more = _ref_type_rate(tp.name, t, q + d, old.types.get(tp.name), obs.at - old.at)
        busy_rate += rate
        details.update(more)
    return busy_rate, details


def _ref_service_s(details: dict[str, float], obs: Observation, policy: ScalingPolicy) -> float:
    window = max((v for k, v in details.items() if k.startswith("service_s:")), default=0.0)
    if window > 0:
        return window
    lifetime = 0.0
    for tp in policy.types:
        t = obs.types.get(tp.name)
        finished = t.completed_total + t.failed_total if t is not None else 0
        if t is not None and finished > 0:
            lifetime = max(lifetime, t.service_ms_total / (1000.0 * finished))
    return lifetime


@settings(max_examples=300, deadline=None)
@given(policy=policies(), old=observations(T0 - 20), new=observations(T0))
def test_sizing_rates_and_service_time_match_the_definitions(
    policy: ScalingPolicy, old: Observation, new: Observation
) -> None:
    history = History(max_age_s=600, sample_every_s=0)
    history.record(T0 - 20, old, Decision(1, "Demand", "1 -> 1"))
    got = sizing.size(new, policy, history)
    busy_rate, details = _ref_rates(new, old, policy)
    assert got.details == details
    assert math.isclose(got.busy_rate, busy_rate, rel_tol=1e-12, abs_tol=1e-12)
    assert stabilization._service_s(got.details, new, policy) == _ref_service_s(
        details, new, policy
    )
    assert stabilization._service_s({}, new, policy) == _ref_service_s({}, new, policy)


@settings(max_examples=200, deadline=None)
@given(policy=policies(), obs=observations(T0))
def test_all_types_paused_matches_the_definition(policy: ScalingPolicy, obs: Observation) -> None:
    types = obs.types
    want = all(tp.name in types and types[tp.name].paused for tp in policy.types)
    assert pause.all_types_paused(Facts(obs, policy, History(), T0, 1)) is want
