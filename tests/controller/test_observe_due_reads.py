"""A delayed set costs the observer one or two counts, not three reads
(issue 28): a ZCOUNT up to the type's longest lead gives due + upcoming, a
second one the due tasks; the earliest due entry (its age) is read on every
pass only for the types a request names in ``ages``, for the others every
``ages_every_s`` (the last reading in between, none once nothing is due).
And a counter that is not a number is refused, not read as 0."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from support.controller import redis_ms
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.types import TypeObservation
from taskscale.keys import Keys


def calls(
    r: redis.Redis, observer: Observer, requests: dict[str, ObserveRequest]
) -> dict[str, int]:
    r.config_resetstat()
    observer.observe(requests)
    stats = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def observe(observer: Observer, request: ObserveRequest) -> dict[str, TypeObservation]:
    return dict(observer.observe({"s": request})["s"].types)


def add_delayed(r: redis.Redis, keys: Keys, task_type: str, *offsets_ms: int) -> None:
    now = redis_ms(r)
    r.zadd(keys.delayed(task_type), {f"{task_type}{o:+d}": now + o for o in offsets_ms})


def test_due_and_upcoming_from_two_counts_without_reading_an_entry(
    r: redis.Redis, keys: Keys
) -> None:
    # 3 due (the oldest 40 s ago), 2 within the 30 s lead, 1 beyond it
    add_delayed(r, keys, "mail", -40_000, -5_000, -1_000, 5_000, 20_000, 90_000)
    observer = Observer(r, keys, ages_every_s=3600)
    request = ObserveRequest(("mail",), lead_s=30, ages=())
    first = observe(observer, request)["mail"]  # a full pass: the due age read too
    assert (first.due, first.upcoming) == (3, 2)
    assert 40 <= (first.oldest_due_s or 0) < 50

    found = calls(r, observer, {"s": request})

    assert found.get("zcount") == 2 + 1, found  # the type's two, the schedulers' one
    assert "zrange" not in found, found


def test_without_a_lead_one_count_is_the_due_count(r: redis.Redis, keys: Keys) -> None:
    add_delayed(r, keys, "mail", -2_000, -1_000, 60_000)
    observer = Observer(r, keys, ages_every_s=3600)
    request = ObserveRequest(("mail",), lead_s=0, ages=())
    observe(observer, request)

    found = calls(r, observer, {"s": request})

    assert found.get("zcount") == 1 + 1, found
    seen = observe(observer, request)["mail"]
    assert (seen.due, seen.upcoming) == (2, 0)


def test_two_leads_on_one_type_count_each_window_exactly(r: redis.Redis, keys: Keys) -> None:
    add_delayed(r, keys, "mail", -1_000, 5_000, 15_000, 25_000, 50_000)
    observer = Observer(r, keys)
    short = ObserveRequest(("mail",), lead_s=10, ages=())
    long = ObserveRequest(("mail",), lead_s=30, ages=())
    seen = observer.observe({"short": short, "long": long})
    assert (seen["short"].types["mail"].due, seen["short"].types["mail"].upcoming) == (1, 1)
    assert (seen["long"].types["mail"].due, seen["long"].types["mail"].upcoming) == (1, 3)


def test_the_due_age_outside_ages_is_sampled_and_kept_between_full_passes(
    r: redis.Redis, keys: Keys
) -> None:
    add_delayed(r, keys, "watched", -30_000)
    add_delayed(r, keys, "sampled", -30_000)
    observer = Observer(r, keys, ages_every_s=3600)
    request = ObserveRequest(("watched", "sampled"), lead_s=30, ages=("watched",))
    first = observe(observer, request)  # the first pass reads every type's
    assert all(30 <= (o.oldest_due_s or 0) < 40 for o in first.values()), first

    add_delayed(r, keys, "watched", -90_000)  # an older due task
    add_delayed(r, keys, "sampled", -90_000)
    second = observe(observer, request)
    assert 90 <= (second["watched"].oldest_due_s or 0) < 100
    assert second["sampled"].oldest_due_s == first["sampled"].oldest_due_s  # the last reading
    assert second["sampled"].due == 2  # the count is read on every pass

    r.delete(keys.delayed("sampled"))
    assert observe(observer, request)["sampled"].oldest_due_s is None  # nothing due: no age

    add_delayed(r, keys, "sampled", -60_000)
    observer.ages_every_s = 0.0  # a full read on every pass now
    assert 60 <= (observe(observer, request)["sampled"].oldest_due_s or 0) < 70


def test_a_type_first_seen_between_full_passes_has_no_due_age_until_the_next(
    r: redis.Redis, keys: Keys
) -> None:
    observer = Observer(r, keys, ages_every_s=3600)
    observe(observer, ObserveRequest(("old",), lead_s=30, ages=()))
    add_delayed(r, keys, "new", -20_000)

    seen = observe(observer, ObserveRequest(("old", "new"), lead_s=30, ages=()))["new"]

    assert seen.due == 1 and seen.oldest_due_s is None


@pytest.mark.parametrize("field", ["claimed", "service_ms"])
def test_a_stats_counter_that_is_not_a_number_is_refused(
    r: redis.Redis, keys: Keys, field: str
) -> None:
    r.hset(keys.stats("mail"), mapping={"claimed": 4, "service_ms": 100})
    r.hset(keys.stats("mail"), field, "lots")

    with pytest.raises(redis.DataError, match=f"mail {field} lots"):
        Observer(r, keys).observe({"s": ObserveRequest(("mail",), 0)})


def test_counters_and_active_come_back_as_numbers(r: redis.Redis, keys: Keys) -> None:
    r.hset(keys.stats("mail"), mapping={"claimed": 4, "completed": 3, "service_ms": 120})
    r.hset(keys.active, "mail", -2)  # below zero (a crash's leftovers): none running

    seen = observe(Observer(r, keys), ObserveRequest(("mail",), 0))["mail"]

    assert (seen.claimed_total, seen.completed_total, seen.service_ms_total) == (4, 3, 120)
    assert seen.failed_total == 0 and seen.active == 0
    # built from the reply field by field: every field of the dataclass, no other
    assert list(vars(seen)) == [f.name for f in dataclasses.fields(TypeObservation)]
