"""A unique task whose worker is SIGKILLed keeps its key while it is reaped
and rerun, and releases it when the rerun completes: the crash neither frees
the key early (a duplicate could be enqueued) nor leaks it (no task could be
enqueued again). Real worker and scheduler processes."""

from __future__ import annotations

import pytest
import redis

from support.fanout_tasks import FINISHED, HANG_ENV, STARTS
from support.waiting import wait_until
from support.workers import kill, processes, start_scheduler, start_worker
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = Keys("taskscale")
TAG = "unique-crash"


def test_a_unique_key_outlives_a_sigkilled_worker_and_is_released_by_the_rerun(
    redis_url: str, r: redis.Redis
) -> None:
    producer = Producer(r, keys=KEYS)

    def enqueue() -> str:
        return producer.enqueue("fo.track", 1, tag=TAG, unique_key="report:1")

    hanging = start_worker(
        redis_url,
        types="fo.track",
        imports=["support.fanout_tasks"],
        threads=1,
        lease=1.5,
        heartbeat=0.3,
        env={HANG_ENV: "1"},
    )
    with processes(hanging) as started:
        first = enqueue()
        wait_until(lambda: r.hget(STARTS.format(tag=TAG), "1"))
        kill(hanging)
        # Its worker is dead and not yet reaped: the task is live, the key held.
        assert enqueue() == first
        started.append(start_scheduler(redis_url))
        wait_until(lambda: int(r.hget(KEYS.stats("fo.track"), "requeued") or 0) == 1)
        assert enqueue() == first  # returned to its queue by the reaper: still held
        started.append(start_worker(redis_url, types="fo.track", imports=["support.fanout_tasks"]))
        wait_until(lambda: r.llen(FINISHED.format(tag=TAG)) == 1)
        wait_until(lambda: not r.exists(KEYS.unique("report:1")))
    assert r.hget(STARTS.format(tag=TAG), "1") == b"2"  # the killed run, then the rerun
    second = enqueue()
    assert second != first
    assert r.get(KEYS.unique("report:1")) == second.encode()
    assert int(r.hget(KEYS.active, "fo.track") or 0) == 0
