"""claim.lua and the drain flag ({ns}:draining, issue 23): a worker whose pod
is flagged claims nothing (status "draining") and passes the wake on; a flag
for another pod, or a malformed key, changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from support.scripts import W, claim
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer

pytestmark = pytest.mark.integration

POD = "workers-7d9-abcde"


def _register(r: redis.Redis, keys: Keys, pod: str = POD) -> None:
    """W's lease and registry record, naming its pod (as the reporter writes it)."""
    scripts_for(r).heartbeat(
        keys=[keys.workers, keys.worker(W)], args=[W, 10_000, "id", W, "pod", pod], client=r
    )


def _raw_claim(r: redis.Redis, keys: Keys, k: int, *types: str) -> list[Any]:
    reply: list[Any] = scripts_for(r).claim(
        keys=[keys.active, keys.workers, keys.inflight(W)],
        args=[keys.prefix, W, k, 0, *types],
        client=r,
    )
    return reply


def test_a_flagged_pod_claims_nothing_while_tasks_wait_and_resumes_unflagged(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    _register(r, keys)
    producer.enqueue_many("a", [(1,), (2,)])
    r.hset(keys.draining, POD, 1_700_000_000_000)
    r.delete(keys.wake("a"))
    reply = _raw_claim(r, keys, 5, "a")
    assert reply[0] == b"draining" and len(reply) == 2
    assert r.llen(keys.queue("a")) == 2  # nothing taken
    assert r.hlen(keys.inflight(W)) == 0 and r.hget(keys.active, "a") is None
    assert r.llen(keys.wake("a")) == 1  # the wake passed on to an idle worker elsewhere
    r.hdel(keys.draining, POD)
    assert len(claim(r, keys, 5, "a")) == 2


def test_no_wake_is_pushed_for_a_type_with_nothing_ready(r: redis.Redis, keys: Keys) -> None:
    _register(r, keys)
    r.hset(keys.draining, POD, 1)
    assert _raw_claim(r, keys, 5, "a")[0] == b"draining"
    assert r.llen(keys.wake("a")) == 0


def test_a_flag_for_another_pod_changes_nothing(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    _register(r, keys)
    producer.enqueue_many("a", [(1,), (2,)])
    r.hset(keys.draining, "some-other-pod", 1)
    assert len(claim(r, keys, 5, "a")) == 2


@pytest.mark.parametrize("value", ["", "not a number", "-1e400", "\xff"])
def test_malformed_flag_values_still_mean_draining_and_break_nothing(
    r: redis.Redis, keys: Keys, producer: Producer, value: str
) -> None:
    _register(r, keys)
    producer.enqueue("a", 1)
    r.hset(keys.draining, POD, value)
    assert _raw_claim(r, keys, 5, "a")[0] == b"draining"  # the field's presence is the flag
    r.hdel(keys.draining, POD)
    assert len(claim(r, keys, 5, "a")) == 1


def test_a_draining_key_of_another_type_is_no_flag(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    _register(r, keys)
    producer.enqueue("a", 1)
    r.set(keys.draining, POD)  # a string where the hash belongs
    assert len(claim(r, keys, 5, "a")) == 1
    assert r.get(keys.draining) == POD.encode()  # read, never written


def test_a_worker_record_without_a_pod_is_never_draining(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    scripts_for(r).heartbeat(keys=[keys.workers, keys.worker(W)], args=[W, 10_000], client=r)
    producer.enqueue("a", 1)
    r.hset(keys.draining, POD, 1)
    r.hset(keys.draining, "", 1)
    assert len(claim(r, keys, 5, "a")) == 1
