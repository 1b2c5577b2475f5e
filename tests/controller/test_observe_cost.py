"""The Redis cost of one observation per type, counted, not timed: a guard
against the reconcile pass growing again (issue 28) that does not depend on
the machine's speed.  INFO commandstats counts every command observe.lua
calls; a busy type may cost at most a fixed number of them per pass, and a
steady pass reads no ready list (the counts come from QUEUED)."""

from __future__ import annotations

import json

import redis

from support.controller import push_ready, redis_ms
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys

BUSY, IDLE, WORKERS = 40, 20, 5
#: Per busy type and steady pass: its delayed tasks up to the lead (ZCOUNT),
#: its due ones (ZCOUNT; the look-ahead is the difference) and the stats
#: counters (HMGET).  (4 before: the first delayed entry was read too.)
BUSY_CALLS = 3
#: Per type with nothing delayed: ZCOUNT and HMGET.
IDLE_CALLS = 2
#: Per type whose oldest ready task is read: LINDEX of its ten lists.
AGE_CALLS = 10
#: Per type with due tasks whose oldest due task is read: ZRANGE of the first.
DUE_AGE_CALLS = 1
#: The pass itself: TIME, 3 hash reads (active, idle, QUEUED) of up to 500
#: types each, an HLEN of the limits and of the paused hash (empty here, so
#: not read field by field), ZRANGEBYSCORE of the workers, ZCOUNT of the
#: schedulers.
FIXED_CALLS = 8


def populate(r: redis.Redis, keys: Keys) -> tuple[str, ...]:
    now = redis_ms(r)
    for i in range(BUSY):
        t = f"busy{i}"
        for level in (0, 5, 9):
            push_ready(r, keys, t, level, json.dumps({"id": f"{t}-{level}", "enqueued_ms": now}))
        r.zadd(keys.delayed(t), {f"{t}-due": now - 5_000, f"{t}-later": now + 10_000})
        r.hset(keys.stats(t), mapping={"enqueued": 5, "claimed": 2})
        r.hset(keys.active, t, 2)
    for i in range(IDLE):
        r.hset(keys.stats(f"idle{i}"), "enqueued", 1)
    for w in range(WORKERS):
        r.zadd(keys.workers, {f"w{w}": now + 60_000})
        r.hset(keys.worker(f"w{w}"), mapping={"pod": "p", "types": "busy0", "threads": 1})
    return (*(f"busy{i}" for i in range(BUSY)), *(f"idle{i}" for i in range(IDLE)))


def calls(r: redis.Redis) -> dict[str, int]:
    """Commands run since the last CONFIG RESETSTAT, the probes themselves left out."""
    stats = r.info("commandstats")
    skip = {"cmdstat_evalsha", "cmdstat_config|resetstat", "cmdstat_info"}
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items() if k not in skip}


def observed_calls(r: redis.Redis, observer: Observer, request: ObserveRequest) -> dict[str, int]:
    r.config_resetstat()
    seen = observer.observe({"s": request})["s"]
    found = calls(r)
    assert seen.types["busy0"].queued == 3 and seen.types["busy0"].due == 1  # it did read
    return found


def test_a_steady_pass_costs_a_few_commands_per_type_and_reads_no_ready_list(
    r: redis.Redis, keys: Keys
) -> None:
    types = populate(r, keys)
    observer = Observer(r, keys)
    request = ObserveRequest(types, lead_s=30, ages=())
    observer.observe({"s": request})  # the first pass reads every type's oldest task

    found = observed_calls(r, observer, request)

    per_worker = WORKERS  # one HMGET of each live worker's record
    budget = BUSY * BUSY_CALLS + IDLE * IDLE_CALLS + FIXED_CALLS + per_worker
    assert sum(found.values()) <= budget, found
    assert "llen" not in found and "exists" not in found and "lindex" not in found, found
    assert "zrange" not in found, found  # no type's oldest due task asked for


def test_the_oldest_ready_task_costs_its_lists_only_for_the_types_asked(
    r: redis.Redis, keys: Keys
) -> None:
    types = populate(r, keys)
    observer = Observer(r, keys)
    request = ObserveRequest(types, lead_s=30, ages=("busy0", "busy1", "idle0"))
    observer.observe({"s": request})

    found = observed_calls(r, observer, request)

    assert found.get("lindex") == 2 * AGE_CALLS, found  # idle0 has nothing ready: not read
    assert found.get("zrange") == 2 * DUE_AGE_CALLS, found  # idle0 has nothing due
    asked = 2 * (AGE_CALLS + DUE_AGE_CALLS)
    budget = BUSY * BUSY_CALLS + IDLE * IDLE_CALLS + FIXED_CALLS + WORKERS + asked
    assert sum(found.values()) <= budget, found
