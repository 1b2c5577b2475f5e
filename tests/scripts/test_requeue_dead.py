"""``requeue.lua`` in ``dead`` mode (a supervisor returning the tasks of a
child process it saw die), against a real redis-server: the same as the
shutdown's ``final`` mode, but each task counts a death like ``reap.lua``."""

from __future__ import annotations

import json

import pytest
import redis

from support.counters import active, stat
from support.scripts import W, claim, complete, heartbeat
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def requeue(r: redis.Redis, keys: Keys, mode: str) -> int:
    return int(
        scripts_for(r).requeue(
            keys=[keys.active, keys.workers, keys.inflight(W), keys.worker(W)],
            args=[keys.prefix, W, mode],
            client=r,
        )
    )


@pytest.mark.parametrize(("mode", "reaped"), [("dead", 1), ("final", None)])
def test_dead_mode_returns_every_task_deregisters_and_counts_a_death(
    r: redis.Redis, keys: Keys, producer: Producer, mode: str, reaped: int | None
) -> None:
    heartbeat(r, keys)
    producer.enqueue("a", 1)
    producer.enqueue("a", 2)
    producer.enqueue("a", 3)
    done, *held = claim(r, keys, 3, "a")
    assert complete(r, keys, done) == 1  # recorded before the death: not returned

    assert requeue(r, keys, mode) == 2
    queue = [json.loads(x) for x in r.lrange(keys.queue("a"), 0, -1)]
    assert sorted(t["id"] for t in queue) == sorted(t["id"] for t in held)
    assert [t.get("reaped") for t in queue] == [reaped, reaped]
    assert active(r, keys, "a") == 0 and stat(r, keys, "a", "requeued") == 2
    assert r.zscore(keys.workers, W) is None and not r.exists(keys.worker(W))
    # a second call (or the reaper) finds nothing left: nothing runs twice
    assert requeue(r, keys, mode) == 0 and r.llen(keys.queue("a")) == 2
