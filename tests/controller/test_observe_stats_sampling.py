"""The stats counters the policy reads on every pass (claimed, completed,
failed, service_ms: the sizing rule's rate) are read on every pass; the
others (metrics only) with the sampled oldest ages, every ``ages_every_s``,
and reported from that reading in between (issue 28)."""

from __future__ import annotations

import redis

from taskscale.controller.observe_plan import EVERY_PASS_STATS, STAT_FIELDS
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys

REQUEST = {"s": ObserveRequest(("t",), lead_s=0, ages=())}


def test_policy_counters_every_pass_the_others_every_ages_every_s(
    r: redis.Redis, keys: Keys
) -> None:
    r.hset(keys.stats("t"), mapping={"claimed": 1, "completed": 1, "dead": 1, "enqueued": 1})
    observer = Observer(r, keys, ages_every_s=3600)
    observer.observe(REQUEST)  # the first pass is a full one
    r.hset(
        keys.stats("t"),
        mapping={"claimed": 7, "completed": 6, "failed": 2, "service_ms": 50, "dead": 9},
    )
    r.hset(keys.stats("t"), mapping={"enqueued": 9, "cancelled": 3})

    obs = observer.observe(REQUEST)["s"].types["t"]

    assert (obs.claimed_total, obs.completed_total, obs.failed_total) == (7, 6, 2)
    assert obs.service_ms_total == 50
    assert (obs.dead_total, obs.enqueued_total, obs.cancelled_total) == (1, 1, 0)

    observer.ages_every_s = 0.0  # a full pass now
    obs = observer.observe(REQUEST)["s"].types["t"]

    assert (obs.dead_total, obs.enqueued_total, obs.cancelled_total) == (9, 9, 3)
    assert obs.claimed_total == 7


def test_a_type_first_seen_between_full_passes_reads_its_policy_counters(
    r: redis.Redis, keys: Keys
) -> None:
    observer = Observer(r, keys, ages_every_s=3600)
    observer.observe(REQUEST)
    r.hset(keys.stats("u"), mapping={"claimed": 4, "completed": 3, "dead": 2})

    obs = observer.observe({"s": ObserveRequest(("t", "u"), lead_s=0, ages=())})["s"].types["u"]

    assert (obs.claimed_total, obs.completed_total, obs.dead_total) == (4, 3, 0)


def test_the_every_pass_counters_are_the_ones_the_sizing_rule_reads() -> None:
    assert STAT_FIELDS[EVERY_PASS_STATS] == ("claimed", "completed", "failed", "service_ms")
