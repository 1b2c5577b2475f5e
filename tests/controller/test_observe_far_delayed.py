"""A type whose delayed tasks are all due beyond the warm-up lead (retry
backoffs, jobs scheduled hours ahead) costs the observer one read of its
delayed set (a ZCOUNT up to the lead: 0 says that nothing is due and nothing
is upcoming) and its stats; a type with tasks within the lead one more, its
due count (issue 28)."""

from __future__ import annotations

import redis

from support.controller import redis_ms
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys

FAR, NEAR = 10, 3
LEAD_S = 30


def delayed_reads(r: redis.Redis, observer: Observer, request: ObserveRequest) -> int:
    """ZCOUNT and ZRANGE calls of one pass (the schedulers' liveness is one)."""
    r.config_resetstat()
    observer.observe({"s": request})
    stats = r.info("commandstats")
    read = ("cmdstat_zcount", "cmdstat_zrange")
    return sum(int(stats.get(name, {}).get("calls", 0)) for name in read)


def test_delayed_tasks_beyond_the_lead_cost_one_read(r: redis.Redis, keys: Keys) -> None:
    now = redis_ms(r)
    for i in range(FAR):
        r.zadd(keys.delayed(f"far{i}"), {"a": now + 3_600_000, "b": now + LEAD_S * 1000 + 500})
    for i in range(NEAR):  # one inside the lead, one beyond
        r.zadd(keys.delayed(f"near{i}"), {"a": now + 10_000, "b": now + 600_000})
    types = (*(f"far{i}" for i in range(FAR)), *(f"near{i}" for i in range(NEAR)))
    observer = Observer(r, keys)
    request = ObserveRequest(types, lead_s=LEAD_S, ages=())
    observer.observe({"s": request})

    # one count up to the lead per type, the near types' due count, and the
    # schedulers' liveness
    assert delayed_reads(r, observer, request) == FAR + 2 * NEAR + 1

    seen = observer.observe({"s": request})["s"].types
    assert all(seen[f"far{i}"].upcoming == 0 and seen[f"far{i}"].due == 0 for i in range(FAR))
    assert all(seen[f"near{i}"].upcoming == 1 for i in range(NEAR))


def test_a_task_just_inside_the_lead_is_upcoming(r: redis.Redis, keys: Keys) -> None:
    now = redis_ms(r)
    # the window is (now, now + lead]: a score far enough that it stays
    # inside for the pass (TIME moves on by the time the script runs)
    r.zadd(keys.delayed("edge"), {"a": now + LEAD_S * 1000 - 200})
    seen = Observer(r, keys).observe({"s": ObserveRequest(("edge",), lead_s=LEAD_S)})
    assert seen["s"].types["edge"].upcoming == 1
