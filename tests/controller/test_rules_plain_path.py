"""The rules' per-scaler shortcuts (issue 28, sixth step) decide what every
rule of the list decides, on random facts: the registry skipping the four
rules whose setting is absent (PLAIN_RULES), the drain hold's plain loop over
the workers, the sizing's busy-pod count and its positional Sizing, the
rollout hold's early return.

The reference below is the registry's loop as it read before (every rule of
RULES, in order, until a final step): a shortcut that changes a decision, a
reason or a detail fails here."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from taskscale.controller import rules
from taskscale.controller.history import History
from taskscale.controller.rules.base import Facts, Fallback, Pause, Step, busy_pod_count, busy_pods
from taskscale.controller.types import (
    Decision,
    Observation,
    ReasonCode,
    Rollout,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
)

T0 = 1_763_750_000.0
NAMES = ("a", "b", "c")
PODS = ("web-0", "web-1", "web-2", "other")

_counts = st.integers(min_value=0, max_value=12)
_totals = st.integers(min_value=0, max_value=60)


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
        service_ms_total=draw(st.integers(min_value=0, max_value=60_000)),
        concurrency_limit=draw(st.none() | st.integers(min_value=1, max_value=20)),
        oldest_ready_s=draw(st.none() | st.floats(min_value=0, max_value=100)),
        paused=draw(st.booleans() | st.just(False)),
    )


@st.composite
def observations(draw: st.DrawFn, at: float) -> Observation:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES)))
    workers = draw(
        st.lists(
            st.builds(
                WorkerObservation,
                worker_id=st.sampled_from(("w1", "w2", "w3", "w4")),
                pod=st.sampled_from(PODS),
                types=st.just(NAMES),
                threads=st.integers(min_value=1, max_value=8),
                busy=st.integers(min_value=0, max_value=8),
            ),
            max_size=4,
        )
    )
    return Observation(
        at=at,
        types={n: draw(type_observations(n)) for n in names},
        workers=tuple(workers),
        schedulers_alive=draw(st.sampled_from((None, 0, 1))),
    )


@st.composite
def policies(draw: st.DrawFn) -> ScalingPolicy:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=3))
    types = tuple(
        TypePolicy(
            n,
            idle_threshold_s=draw(st.sampled_from((0, 30, 300))),
            max_queue_wait_s=draw(st.sampled_from((None, None, 5.0, 50.0))),
        )
        for n in names
    )
    return ScalingPolicy(
        types=types,
        tasks_per_replica=draw(st.integers(1, 8)),
        min_replicas=draw(st.integers(0, 2)),
        max_replicas=draw(st.integers(3, 40)),
        scale_up_stabilization_s=draw(st.sampled_from((0.0, 10.0))),
        scale_down_stabilization_s=draw(st.sampled_from((0.0, 60.0))),
        max_scale_up_step=draw(st.sampled_from((0, 2))),
        max_scale_down_step=draw(st.sampled_from((0, 1))),
        warmup_lead_s=draw(st.sampled_from((10.0, 30.0, 120.0))),
    )


_rollouts = st.builds(
    Rollout,
    generation=st.integers(1, 3),
    observed_generation=st.integers(1, 3),
    replicas=st.integers(0, 6),
    updated=st.integers(0, 6),
    total=st.integers(0, 8),
)


@st.composite
def facts(draw: st.DrawFn) -> Facts:
    policy = draw(policies())
    history = History(max_age_s=600, sample_every_s=0)
    old = draw(observations(T0 - 20))
    for k, rec in enumerate(draw(st.lists(st.integers(0, 30), max_size=4))):
        history.record(T0 - 20 + k, old, Decision(rec, ReasonCode.DEMAND, "x"))
    plain = draw(st.booleans())  # half the cases without any setting at all
    return Facts(
        draw(st.none() | observations(T0) | observations(T0)),
        policy,
        history,
        T0,
        draw(st.integers(0, 12)),
        pause=None if plain else draw(st.none() | st.builds(Pause, st.none() | st.just(3))),
        fallback=None if plain else draw(st.none() | st.builds(Fallback, st.integers(0, 5))),
        redis_failures=draw(st.integers(0, 4)),
        statefulset=None if plain else draw(st.none() | st.just("web")),
        rollout=None if plain else draw(st.none() | _rollouts),
        draining=frozenset() if plain else frozenset(draw(st.lists(st.sampled_from(PODS)))),
    )


def _reference_apply(facts: Facts) -> Decision:
    step = Step(facts.current, ReasonCode.STEADY, "no rule changed the replicas")
    for rule in rules.RULES:
        step = rule(facts, step)
        if step.final:
            break
    return step.decision(facts.current)


@settings(max_examples=400, deadline=None)
@given(facts=facts())
def test_the_registry_decides_what_every_rule_decides(facts: Facts) -> None:
    got = rules.apply(facts)
    want = _reference_apply(facts)
    assert (got.desired, got.reason_code, got.reason) == (
        want.desired,
        want.reason_code,
        want.reason,
    )
    assert got.details == want.details
    if facts.observation is not None:
        assert busy_pod_count(facts.observation) == len(busy_pods(facts.observation))


def test_the_plain_list_skips_only_the_rules_of_the_pass_settings() -> None:
    def names(rule_list: tuple[rules.Rule, ...]) -> list[str]:
        return [r.__module__.rpartition(".")[2] for r in rule_list]

    skipped = [n for n in names(rules.RULES) if n not in names(rules.PLAIN_RULES)]
    assert skipped == ["fallback", "drain_capacity", "rollout_hold", "ordinal_hold"]
    assert names(rules.PLAIN_RULES) == [n for n in names(rules.RULES) if n not in skipped]


def _obs(workers: tuple[WorkerObservation, ...], **counts: int) -> Observation:
    return Observation(T0, {"a": TypeObservation("a", **counts)}, workers, None)


_POLICY = ScalingPolicy(types=(TypePolicy("a"),), scale_down_stabilization_s=0.0)
_BUSY = (WorkerObservation("w", "web-2", ("a",), 4, 1),)
#: One setting each, on facts where its rule changes the decision: a registry
#: that skipped the rule with the setting present decides otherwise.
_SETTING_CASES = {
    "fallback": Facts(None, _POLICY, History(), T0, 1, fallback=Fallback(5), redis_failures=3),
    "draining": Facts(
        _obs(_BUSY, queued=7, active=1), _POLICY, History(), T0, 0, draining=frozenset({"web-2"})
    ),
    "rollout": Facts(_obs(()), _POLICY, History(), T0, 5, rollout=Rollout(2, 1, 5, 5, 5)),
    "statefulset": Facts(_obs(_BUSY, active=1), _POLICY, History(), T0, 3, statefulset="web"),
}


def test_each_setting_runs_its_rule() -> None:
    for name, case in _SETTING_CASES.items():
        plain = Step(case.current, ReasonCode.STEADY, "no rule changed the replicas")
        for rule in rules.PLAIN_RULES:
            plain = rule(case, plain)
            if plain.final:
                break
        got = rules.apply(case)
        assert got == _reference_apply(case), name
        assert (got.desired, got.reason) != (plain.replicas, plain.decision(case.current).reason)
