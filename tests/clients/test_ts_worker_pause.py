"""A paused type is paused for the TypeScript worker too: it calls the same
exported claim.lua, which reads ``{ns}:paused`` -- pausing needs nothing of a
worker's language."""

from __future__ import annotations

import time

import pytest
import redis

from support.counters import stat
from support.node_client import start_ts_worker, stop_ts
from support.waiting import wait_until
from taskscale.keys import Keys
from taskscale.pausing import pause_type, resume_type
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def test_the_typescript_worker_claims_no_paused_type(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    pause_type("noop", client=r, keys=keys)
    producer.enqueue_many("noop", [[i] for i in range(5)])
    producer.enqueue_many("echo", [[i] for i in range(5)])
    worker = start_ts_worker(redis_url, "noop,echo", concurrency=2)
    try:
        wait_until(lambda: stat(r, keys, "echo", "completed") == 5, timeout=20, what="echoes")
        time.sleep(1.0)
        assert stat(r, keys, "noop", "completed") == 0
        assert int(r.hget(keys.queued, "noop") or 0) == 5
        resume_type("noop", client=r, keys=keys)
        wait_until(lambda: stat(r, keys, "noop", "completed") == 5, timeout=20, what="noops")
    finally:
        log = stop_ts(worker)
    assert worker.returncode == 0, log
