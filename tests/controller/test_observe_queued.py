"""The observer's ready count is QUEUED (docs/schema.md, "The ready count"):
a producer that pushes without counting is seen after the scheduler's
recount, and a count below 0 or not a number reads as 0, never as an error."""

from __future__ import annotations

import pytest
import redis

from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys
from taskscale.scheduling.scheduler import Scheduler


def queued(observer: Observer, task_type: str) -> int:
    return observer.observe({"s": ObserveRequest((task_type,), 0)})["s"].types[task_type].queued


def test_a_producer_that_does_not_count_is_seen_after_the_recount(
    r: redis.Redis, keys: Keys
) -> None:
    r.sadd(keys.types, "plain")
    r.rpush(keys.queue("plain", 5), '{"id":"a","type":"plain"}', '{"id":"b","type":"plain"}')
    observer = Observer(r, keys)
    assert queued(observer, "plain") == 0  # not counted: not seen yet

    Scheduler(r, keys=keys).recount()

    assert queued(observer, "plain") == 2


@pytest.mark.parametrize("stored", ["-3", "x", ""])
def test_a_count_below_zero_or_not_a_number_reads_as_zero(
    r: redis.Redis, keys: Keys, stored: str
) -> None:
    r.hset(keys.queued, "odd", stored)
    assert queued(Observer(r, keys), "odd") == 0
