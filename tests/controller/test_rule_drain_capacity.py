"""The drain capacity (rules/drain_capacity.py): a busy pod on a draining node
takes no more tasks, so the rest of the work is sized on the other replicas."""

from __future__ import annotations

from rulefacts import facts, observation, policy, sizing, step

from taskscale.controller.rules import drain_capacity
from taskscale.controller.types import ReasonCode, WorkerObservation


def _worker(pod: str, busy: int) -> WorkerObservation:
    return WorkerObservation(f"w-{pod}", pod, ("a",), 4, busy)


def test_a_busy_draining_pods_free_threads_are_no_capacity() -> None:
    obs = observation((_worker("p1", 1), _worker("p2", 0)), a={"queued": 7, "active": 1})
    sized = step(2, sized=sizing(queued=7, active=1, busy_pods=1))  # ceil(8 / 4)
    got = drain_capacity.apply(facts(obs, current=2, draining=frozenset({"p1"})), sized)
    assert (got.replicas, got.recommendation, got.code) == (3, 3, ReasonCode.DEMAND)
    assert got.why == (
        "the sizing; 1 draining pod(s) finish 1 task(s) and take no more: "
        "2 other replica(s) for the rest of the work"
    )


def test_nothing_changes_without_draining_pods_or_with_idle_ones() -> None:
    obs = observation((_worker("p1", 0),), a={"queued": 7, "active": 1})
    sized = step(2, sized=sizing(queued=7, active=1))
    assert drain_capacity.apply(facts(obs, current=2), sized) is sized
    # an idle draining pod is evicted at once: counting it would only churn
    assert drain_capacity.apply(facts(obs, current=2, draining=frozenset({"p1"})), sized) is sized
    # a flag for a pod the registry does not know: nothing to count
    assert drain_capacity.apply(facts(obs, current=2, draining=frozenset({"gone"})), sized) is sized


def test_a_draining_pod_with_no_other_work_needs_no_replacement() -> None:
    obs = observation((_worker("p1", 1),), a={"active": 1})
    sized = step(1, sized=sizing(active=1, busy_pods=1))
    assert drain_capacity.apply(facts(obs, current=1, draining=frozenset({"p1"})), sized) is sized


def test_capped_at_max_replicas_and_never_lowered() -> None:
    workers = (_worker("p1", 1), _worker("p2", 1))
    obs = observation(workers, a={"queued": 7, "active": 2})
    pol = policy(max_replicas=3)
    sized = step(3, sized=sizing(queued=7, active=2, busy_pods=2))
    flags = frozenset({"p1", "p2"})
    # wanted ceil(7 / 4) + 2 = 4, capped at 3 = the step: unchanged
    assert drain_capacity.apply(facts(obs, pol, current=3, draining=flags), sized) is sized
    low = step(2, sized=sizing(queued=7, active=2, busy_pods=2))
    got = drain_capacity.apply(facts(obs, pol, current=2, draining=flags), low)
    assert (got.replicas, got.code) == (3, ReasonCode.MAX_REPLICAS)
    assert got.why.endswith("capped at maxReplicas")
    high = step(9, sized=sizing(queued=7, active=2))
    assert drain_capacity.apply(facts(obs, current=3, draining=flags), high) is high


def test_without_an_observation_or_a_sizing_nothing_changes() -> None:
    sized = step(2)
    assert drain_capacity.apply(facts(None, draining=frozenset({"p1"})), sized) is sized
    bare = step(2)._replace(sizing=None)
    obs = observation((_worker("p1", 1),), a={"queued": 7})
    assert drain_capacity.apply(facts(obs, draining=frozenset({"p1"})), bare) is bare
