"""observe.lua's arguments stay a handful however many types are observed
(issue 28): the type names, the look-ahead windows and the types whose oldest
ready task is read go as one argument each, because packing ~3000 arguments
per pass cost the controller more than Redis spent on the reads."""

from __future__ import annotations

import redis

from support.controller import redis_ms
from taskscale.controller.observe_plan import build_plan
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys


def test_the_argument_count_does_not_grow_with_the_types(keys: Keys) -> None:
    def plan_args(n: int) -> int:
        types = tuple(f"t{i}" for i in range(n))
        requests = {
            "a": ObserveRequest(types, lead_s=30, ages=types[:3]),
            "b": ObserveRequest(types[: n // 2], lead_s=5),
        }
        return len(build_plan(keys, requests).args)

    assert plan_args(10) == plan_args(1000) < 30


def test_types_windows_and_ages_split_back_exactly(r: redis.Redis, keys: Keys) -> None:
    now = redis_ms(r)
    names = ("a", "b.c", "d-e_9", "Z")  # every character class the names allow
    for i, t in enumerate(names):
        r.zadd(keys.delayed(t), {f"{t}{k}": now + 2_000 + k * 10_000 for k in range(i + 1)})
        r.hset(keys.stats(t), "claimed", 10 + i)
    short = ObserveRequest(names[:2], lead_s=5)  # the same types, a second window
    long = ObserveRequest(names, lead_s=60)
    seen = Observer(r, keys).observe({"short": short, "long": long})
    assert [seen["long"].types[t].upcoming for t in names] == [1, 2, 3, 4]
    assert [seen["short"].types[t].upcoming for t in names[:2]] == [1, 1]
    assert [seen["long"].types[t].claimed_total for t in names] == [10, 11, 12, 13]


def test_no_types_is_an_empty_reading(r: redis.Redis, keys: Keys) -> None:
    seen = Observer(r, keys).observe({"s": ObserveRequest((), lead_s=30)})
    assert seen["s"].types == {}
