"""One task type served by Python and TypeScript workers at once, with one
of each SIGKILLed mid-run: nothing is lost (every task completes exactly
once as counted, each ran to its end at least once), nothing is
dead-lettered, the killed workers' tasks come back through the reaper,
and ACTIVE_TASKS ends at exactly 0, never clamped."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
import redis
from fleet_tasks import FINISHED

from support.counters import active, stat
from support.node_client import start_ts_worker, stop_ts
from support.waiting import wait_until
from support.workers import kill, running_scheduler, start_worker, stop
from taskscale.keys import Keys
from taskscale.producer import Call, Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASKS = 400
RUN_S = 0.04
FLEET_TASKS = Path(__file__).resolve().parent / "node" / "fleet_tasks.js"


def test_a_mixed_fleet_under_kill_9_loses_nothing_and_keeps_active_tasks_exact(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    lease = {"lease": 1.5, "heartbeat": 0.3}
    python = [
        start_worker(redis_url, types="mark", imports=("fleet_tasks",), threads=4, **lease)
        for _ in range(2)
    ]
    typescript = [
        start_ts_worker(redis_url, "mark", module=FLEET_TASKS, concurrency=4, **lease)
        for _ in range(2)
    ]
    victims: list[subprocess.Popen[bytes]] = [python[0], typescript[0]]
    try:
        wait_until(lambda: r.zcard(keys.workers) == 4, timeout=30, what="4 workers registered")
        producer.enqueue_many("mark", [Call((n, RUN_S)) for n in range(TASKS)])
        with running_scheduler(redis_url, max_sleep_s=0.1):  # the reaper
            wait_until(lambda: r.llen(FINISHED) >= TASKS // 4, timeout=30, what="a quarter done")
            for victim in victims:
                kill(victim)  # SIGKILL: no shutdown code runs
            wait_until(
                lambda: stat(r, keys, "mark", "completed") == TASKS, timeout=60, what="all done"
            )
            wait_until(lambda: r.zcard(keys.workers) == 2, timeout=10, what="the dead reaped")
    finally:
        for process in python:
            stop(process)
        for process in typescript:
            stop_ts(process)
    runs = Counter(x.decode().split(":")[0] for x in r.lrange(FINISHED, 0, -1))
    assert set(runs) == {str(n) for n in range(TASKS)}  # every task ran to its end
    by_language = Counter(x.decode().split(":")[1] for x in r.lrange(FINISHED, 0, -1))
    assert by_language["py"] > 0 and by_language["ts"] > 0  # both served the type
    assert stat(r, keys, "mark", "completed") == TASKS and stat(r, keys, "mark", "dead") == 0
    assert stat(r, keys, "mark", "requeued") >= 1  # the killed workers held tasks
    assert active(r, keys, "mark") == 0 and stat(r, keys, "mark", "active_underflow") == 0
    assert r.llen(keys.queue("mark", 5)) == 0 and not r.keys(keys.prefix + "inflight:*")
