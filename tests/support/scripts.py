"""The Lua scripts called the way the runtime calls them, for the tests that
drive them directly: one worker ``W`` that heartbeats, claims and records
outcomes (support.counters reads what they count)."""

from __future__ import annotations

import json
from typing import Any

import redis

from taskscale.keys import Keys
from taskscale.luascripts import scripts_for

#: The worker id the script tests claim as.
W = "w1"


def heartbeat(r: redis.Redis, keys: Keys, worker: str = W, lease_ms: int = 10_000) -> None:
    scripts_for(r).heartbeat(
        keys=[keys.workers, keys.worker(worker)], args=[worker, lease_ms, "id", worker], client=r
    )


def claim(
    r: redis.Redis, keys: Keys, k: int, *types: str, worker: str = W, dead_cap: int = 0
) -> list[dict[str, Any]]:
    reply = scripts_for(r).claim(
        keys=[keys.active, keys.workers, keys.inflight(worker)],
        args=[keys.prefix, worker, k, dead_cap, *types],
        client=r,
    )
    assert reply[0] == b"ok", reply
    return [json.loads(reply[i + 2]) for i in range(3, len(reply), 3)]


def complete(r: redis.Redis, keys: Keys, *tasks: dict[str, Any], worker: str = W) -> int:
    args: list[Any] = [keys.prefix, len(tasks)]
    for t in tasks:
        args += [
            t["id"],
            t["type"],
            7,
            t.get("reply_to", ""),
            60,
            '{"ok":true}',
            t.get("fanout", ""),
        ]
    return int(
        scripts_for(r).complete(
            keys=[keys.active, keys.idle_since, keys.inflight(worker)], args=args, client=r
        )
    )


def fail(r: redis.Redis, keys: Keys, task: dict[str, Any], mode: str, *rest: Any) -> int:
    return int(
        scripts_for(r).fail(
            keys=[keys.active, keys.idle_since, keys.inflight(W)],
            args=[keys.prefix, task["id"], task["type"], 3, mode, *rest],
            client=r,
        )
    )


def promote(r: redis.Redis, keys: Keys) -> list[int]:
    return [
        int(x)
        for x in scripts_for(r).promote(keys=[keys.types], args=[keys.prefix, 1000], client=r)
    ]


def delayed_entries(r: redis.Redis, key: str) -> list[tuple[bytes, float]]:
    entries: list[tuple[bytes, float]] = r.zrange(key, 0, -1, withscores=True)  # type: ignore[assignment]
    return entries
