"""The observer's per-scaler assembly (issue 28, sixth step) gives what the
plain definitions give, on random requests and workers: each scaler's
windows picked by the plan's indexes (not looked up by type and lead), its
workers gathered once per worker (not a set of every type's workers per
scaler), and the unchecked constructors of Observation and Decision.

The reference functions below are the definitions as they read before
(the fifth step's observer.py): a shortcut that drops a case fails here."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskscale.controller.observe_plan import ObserveRequest, build_plan, lead_ms
from taskscale.controller.observer import _served
from taskscale.controller.types import Decision, Observation, TypeObservation, WorkerObservation
from taskscale.keys import Keys

TYPES = ("a", "b", "c", "d", "e", "f")

_type_lists = st.lists(st.sampled_from(TYPES), min_size=1, max_size=5)
_requests = st.dictionaries(
    st.sampled_from(("s0", "s1", "s2", "s3")),
    st.builds(
        ObserveRequest,
        types=_type_lists.map(tuple),  # a type named twice included
        lead_s=st.sampled_from((0.0, 5.0, 30.0, 30.0004)),
    ),
    min_size=1,
)
_workers = st.lists(
    st.builds(
        WorkerObservation,
        worker_id=st.sampled_from(("w1", "w2", "w3")),  # equal workers too
        pod=st.sampled_from(("p1", "p2")),
        types=st.lists(st.sampled_from((*TYPES, "unserved")), max_size=4).map(tuple),
        threads=st.integers(min_value=1, max_value=4),
        busy=st.integers(min_value=0, max_value=4),
    ),
    max_size=8,
)


def _reference_workers(
    workers: list[WorkerObservation], request: ObserveRequest
) -> tuple[WorkerObservation, ...]:
    """observer.py before: type -> worker indexes, then per scaler a sorted set."""
    serving: dict[str, list[int]] = {}
    for n, w in enumerate(workers):
        for t in w.types:
            serving.setdefault(t, []).append(n)
    served = sorted({w for t in request.types for w in serving.get(t, ())})
    return tuple(workers[w] for w in served)


@settings(max_examples=300, deadline=None)
@given(requests=_requests, workers=_workers)
def test_each_scaler_gets_its_windows_and_its_workers(
    requests: dict[str, ObserveRequest], workers: list[WorkerObservation]
) -> None:
    plan = build_plan(Keys("fast"), requests)
    served = _served(workers, plan.type_requests)

    for name, request in requests.items():
        picked = [plan.windows[j] for j in plan.request_windows[name]]
        assert picked == [(t, lead_ms(request)) for t in request.types]
        mine = tuple(served.get(name, ()))
        reference = _reference_workers(workers, request)
        assert mine == reference
        # the very objects, in the registry's order, each once
        assert [id(w) for w in mine] == [id(w) for w in reference]
    assert set(served) <= set(requests)


def test_a_worker_of_two_scalers_types_is_in_both_once() -> None:
    requests = {
        "x": ObserveRequest(("a", "b"), 30.0),
        "y": ObserveRequest(("b", "c"), 5.0),
    }
    plan = build_plan(Keys("fast"), requests)
    both = WorkerObservation("w", "p", ("a", "c", "b"), 4, 1)
    other = WorkerObservation("v", "q", ("c",), 4, 0)

    served = _served([both, other], plan.type_requests)

    assert served == {"x": [both], "y": [both, other]}
    assert plan.windows[plan.request_windows["y"][0]] == ("b", 5000)


def test_observation_of_is_the_constructor_without_its_cost() -> None:
    types = {"a": TypeObservation("a", queued=3)}
    workers = (WorkerObservation("w", "p", ("a",), 4, 1),)
    built = Observation(at=12.5, types=types, workers=workers, schedulers_alive=0)

    fast = Observation.of(12.5, types, workers, 0)

    assert fast == built and repr(fast) == repr(built)
    assert dataclasses.replace(fast, at=1.0) == dataclasses.replace(built, at=1.0)
    assert fast != Observation.of(12.5, types, workers, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.at = 5.0  # type: ignore[misc]


def test_decision_of_is_the_constructor_without_its_cost() -> None:
    built = Decision(desired=3, reason_code="Demand", reason="2 -> 3: x", details={"r": 3})

    fast = Decision.of(3, "Demand", "2 -> 3: x", {"r": 3})

    assert fast == built and repr(fast) == repr(built)
    assert dataclasses.replace(fast, desired=1) == dataclasses.replace(built, desired=1)
    assert fast != Decision.of(3, "Demand", "2 -> 3: y", {"r": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.desired = 5  # type: ignore[misc]
