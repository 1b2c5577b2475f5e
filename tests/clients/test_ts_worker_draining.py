"""A draining pod is draining for the TypeScript worker too (issue 23): it
calls the same exported claim.lua, which reads ``{ns}:draining`` for the pod
of the worker's registry record (``POD_NAME``): flagged, it claims nothing
while tasks wait; cleared, it serves them."""

from __future__ import annotations

import time

import pytest
import redis

from support.counters import stat
from support.node_client import start_ts_worker, stop_ts
from support.waiting import wait_until
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration

POD = "ts-drain-pod"


def test_the_typescript_worker_claims_nothing_while_its_pod_drains(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    r.hset(keys.draining, POD, 1)
    r.hset(keys.draining, "another-pod", 1)
    worker = start_ts_worker(redis_url, "echo", concurrency=2, env={"POD_NAME": POD})
    try:
        wait_until(lambda: r.zcard(keys.workers) == 1, timeout=20, what="registered")
        producer.enqueue_many("echo", [[i] for i in range(3)])
        time.sleep(2.5)  # two drain polls
        assert stat(r, keys, "echo", "claimed") == 0
        r.hdel(keys.draining, POD)
        wait_until(lambda: stat(r, keys, "echo", "completed") == 3, timeout=20, what="served")
    finally:
        log = stop_ts(worker)
    assert worker.returncode == 0, log
