"""claim.lua's chain-wake pushes a token only when none is waiting (issue 27):
a busy worker claiming again and again under a backlog no longer piles up
tokens that each make an idle claimer claim for nothing afterwards."""

from __future__ import annotations

import pytest
import redis

from support.scripts import claim, heartbeat
from taskscale.keys import Keys
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def test_claims_that_leave_work_keep_one_token_waiting_not_one_each(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("a", [(i,) for i in range(6)])
    r.delete(keys.wake("a"))
    for _ in range(4):  # each fills its k and leaves work behind
        claim(r, keys, 1, "a")
    assert r.llen(keys.wake("a")) == 1
    r.delete(keys.wake("a"))  # an idle worker popped it: the next claim pushes again
    claim(r, keys, 1, "a")
    assert r.llen(keys.wake("a")) == 1


def test_no_token_when_no_work_is_left(r: redis.Redis, keys: Keys, producer: Producer) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("a", [(1,), (2,)])
    r.delete(keys.wake("a"))
    claim(r, keys, 2, "a")  # took everything
    assert r.llen(keys.wake("a")) == 0
