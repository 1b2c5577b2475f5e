"""The overview in one ``console_overview.lua`` call (issue 24, item 5):
the same view as ``taskscale status`` (``status.collect``) on the same
data, plus the console's additions, in a number of Redis commands that does
not grow with the number of types."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from bench.dashboard_bench import populate
from taskscale import status
from taskscale.dashboard.overview_script import read_overview
from taskscale.keys import Keys
from taskscale.limits import set_limits

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")


def test_the_overview_is_the_status_plus_the_console_s_fields(r: redis.Redis) -> None:
    populate(r, types=40, workers=6)
    set_limits("type-0003", rate="5/s", concurrency=2, client=r, keys=KEYS)
    set_limits("limited-only", concurrency=1, client=r, keys=KEYS)
    r.zadd(KEYS.schedulers, {"s1": time.time() * 1000 + 60_000, "gone": 1})
    r.hset(KEYS.stats("type-0001"), mapping={"cancelled": 4, "dead": 2, "service_ms": 70})
    before = status.collect(r, KEYS)
    found = read_overview(r, KEYS)
    assert found.keys() == before.keys()
    assert list(found["types"]) == list(before["types"])
    assert "limited-only" in found["types"]
    for name, was in before["types"].items():
        row = found["types"][name]
        stats = was.pop("stats")
        # the clocks of the two reads differ by the time between them
        assert row.pop("oldest_overdue_s") == pytest.approx(was.pop("oldest_overdue_s"), abs=2)
        assert {k: row[k] for k in was} == was, name
        assert row["claimed"] == stats.get("claimed", 0)
        assert row["service_ms"] == stats.get("service_ms", 0)
        assert row["dead_lettered"] == stats.get("dead", 0)
    assert found["types"]["type-0001"]["cancelled"] == 4
    assert found["types"]["type-0003"]["limits"]["concurrency"] == 2
    assert found["workers"] == before["workers"]
    assert found["schedulers"] == ["s1"] == before["schedulers"]
    assert found["warnings"] == before["warnings"]
    assert found["open_fanouts"] == before["open_fanouts"]


def test_the_console_s_additions_on_the_redis_clock(r: redis.Redis) -> None:
    now_ms = int(time.time() * 1000)
    env = {"id": "a", "type": "t", "args": [], "kwargs": {}, "enqueued_ms": now_ms - 5000}
    r.sadd(KEYS.types, "t", "empty")
    r.rpush(KEYS.queue("t", 3), json.dumps(env))
    r.rpush(KEYS.queue("t", 3), json.dumps({**env, "id": "b", "enqueued_ms": now_ms}))
    r.zadd(KEYS.delayed("t"), {"due-soon": now_ms + 30_000, "later": now_ms + 600_000})
    r.zadd(KEYS.delayed("t"), {"overdue": now_ms - 20_000})
    r.hset(KEYS.idle_since, "empty", f"{now_ms / 1000 - 100:.3f}")
    t = read_overview(r, KEYS)["types"]["t"]
    assert t["queued_by_priority"] == [0, 0, 0, 2, 0, 0, 0, 0, 0, 0]
    assert 5.0 <= t["oldest_ready_s"] < 8.0
    assert (t["delayed"], t["overdue"], t["due_soon"]) == (3, 1, 1)
    assert 20.0 <= t["oldest_overdue_s"] < 23.0
    empty = read_overview(r, KEYS)["types"]["empty"]
    assert empty["oldest_ready_s"] is None and empty["due_soon"] == 0
    assert 100.0 <= empty["idle_for_s"] < 103.0


@pytest.mark.parametrize("types", [10, 300])
def test_one_script_call_whatever_the_number_of_types(r: redis.Redis, types: int) -> None:
    populate(r, types=types, workers=5)
    read_overview(r, KEYS)  # the script is loaded once per client
    sent: list[str] = []
    send = r.execute_command

    def counted(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]))
        return send(*args, **options)

    r.execute_command = counted  # type: ignore[method-assign]
    found = read_overview(r, KEYS)
    assert len(found["types"]) == types
    assert sent == ["EVALSHA", "ZRANGE"]  # the overview, then the schedules' names
