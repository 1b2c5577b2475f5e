"""The JSON of the console's browsing and history (no browser): queued per
priority, running, recent runs, the search, the history -- and malformed
input answered 400, never 500."""

from __future__ import annotations

import json

import pytest
import redis
from dashhelpers import KEYS, dashboard, get

from taskscale import history
from taskscale.producer import Producer
from taskscale.server_clock import server_time

pytestmark = pytest.mark.integration


def test_browse_and_history_json(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    ids = producer.enqueue_many("email", [[f"arg-{i}"] for i in range(7)], priority=2)
    r.lpush(KEYS.recent("email"), json.dumps({"id": "x1", "outcome": "completed", "ms": 3}))
    bucket = history.current_bucket(server_time(r, KEYS).ms)
    r.hset(KEYS.history("email", bucket), mapping={"c": 4, "d": 1, "s5": 4})
    with dashboard(redis_url) as d:
        code, doc, _ = get(d.url, "api/queued/email/2?start=5&count=10")
        assert code == 200
        assert [t["id"] for t in doc["tasks"]] == ids[5:]
        assert doc["by_priority"][2] == 7 and doc["total"] == 7
        assert all(t["enqueued_at_ms"] > 1_700_000_000_000 for t in doc["tasks"])
        assert get(d.url, "api/running")[1]["tasks"] == []
        assert get(d.url, "api/recent/email")[1]["runs"][0]["id"] == "x1"
        found = get(d.url, "api/search?q=arg-3&type=email")[1]
        assert [m["id"] for m in found["matches"]] == [ids[3]] and found["examined"] == 7
        rows = get(d.url, "api/history?type=email&since=60")[1]["rows"]
        assert sum(row["completed"] for row in rows) == 4
        assert sum(row["dead"] for row in rows) == 1
        overall = get(d.url, "api/history?since=60")[1]["rows"]
        assert sum(row["completed"] for row in overall) == 4
        for bad in (
            "api/queued/email/x",
            "api/queued/email/10",
            "api/queued/bad%20type/1",
            "api/queued/email/1?start=x",
            "api/recent/bad%20type",
            "api/search",
            "api/search?q=" + "x" * 201,
            "api/search?q=a&type=bad%20type",
            "api/history?since=x",
            "api/history?since=100000",
        ):
            code, answer, _ = get(d.url, bad)
            assert code == 400, (bad, code, answer)
            assert answer["error"]
