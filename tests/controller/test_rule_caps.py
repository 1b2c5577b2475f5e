"""The concurrency-cap rule (rules/caps.py): a type capped at K counts K tasks."""

from __future__ import annotations

from rulefacts import facts, observation, sizing, step

from taskscale.controller.rules import caps
from taskscale.controller.types import TypeObservation


def test_demand_beyond_the_cap_is_dropped_upcoming_first_then_queued_then_due() -> None:
    notes: list[str] = []
    obs = TypeObservation("a", upcoming=2, queued=5, due=3, active=1, concurrency_limit=4)
    kept, over = caps.within_cap(obs, 2, notes)
    assert over == 7  # 10 waiting + 1 active, 4 may run
    assert (kept.upcoming, kept.queued, kept.due, kept.active) == (0, 0, 3, 1)
    assert notes == ["'a' runs at most 4: 2 replicas at most"]


def test_an_uncapped_type_or_one_within_its_cap_is_counted_whole() -> None:
    notes: list[str] = []
    free = TypeObservation("a", queued=50)
    assert caps.within_cap(free, 4, notes) == (free, 0)
    within = TypeObservation("a", queued=2, active=1, concurrency_limit=4)
    assert caps.within_cap(within, 4, notes) == (within, 0)
    assert notes == []


def test_the_sentence_says_how_many_wait_beyond_a_cap() -> None:
    capped = sizing(capped=7, cap_note="'a' runs at most 4: 2 replicas at most")
    noted = caps.apply(facts(observation()), step(2, sized=capped))
    assert noted.why == (
        "the sizing; 7 more waiting beyond a concurrency cap "
        "('a' runs at most 4: 2 replicas at most)"
    )
