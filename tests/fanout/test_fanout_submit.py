"""The submit half of fan-out, on a real Redis with no worker: what one
``fanout_submit`` script call leaves behind (docs/schema.md, "Fan-out
accounting"), and how waiting and subscribing behave before and after done."""

from __future__ import annotations

import json
import threading

import pytest
import redis

from taskscale.envelope import PayloadTooLarge
from taskscale.fanout import (
    FanoutHandle,
    FanoutResult,
    FanoutSettings,
    FanoutTimeout,
    UnknownFanout,
    submit_fanout,
)
from taskscale.keys import Keys
from taskscale.producer import Call

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")


def _envelopes(r: redis.Redis, key: str) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in r.lrange(key, 0, -1)]


def test_submit_releases_only_limit_sub_tasks_and_parks_the_rest(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [[i] for i in range(10)], limit=3, priority=2, keys=KEYS)

    ready = _envelopes(r, KEYS.queue("resize", 2))
    pending = _envelopes(r, KEYS.fanout_pending(handle.id))
    assert [e["args"] for e in ready] == [[0], [1], [2]]
    assert [e["args"] for e in pending] == [[i] for i in range(3, 10)]
    assert all(e["fanout"] == handle.id and e["type"] == "resize" for e in ready + pending)
    assert all(e["priority"] == 2 for e in ready + pending)
    status = handle.status()
    assert (status.total, status.limit, status.running, status.pending) == (10, 3, 3, 7)
    assert not status.done


def test_released_sub_tasks_are_stamped_and_pending_ones_are_not(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [[i] for i in range(4)], limit=2, keys=KEYS)

    ready = _envelopes(r, KEYS.queue("resize", 5))
    pending = _envelopes(r, KEYS.fanout_pending(handle.id))
    server_ms = r.time()[0] * 1000
    assert all(abs(int(str(e["enqueued_ms"])) - server_ms) < 60_000 for e in ready)
    assert all("enqueued_ms" not in e for e in pending)
    assert next(iter(ready[0])) == "enqueued_ms" and next(iter(pending[0])) == "id"


def test_submit_counts_only_released_tasks_as_enqueued_and_signals_demand(
    r: redis.Redis,
) -> None:
    demand = r.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    demand.subscribe(KEYS.demand_channel)
    try:
        submit_fanout(r, "resize", [[i] for i in range(50)], limit=4, keys=KEYS)
        assert r.hget(KEYS.stats("resize"), "enqueued") == b"4"
        assert r.sismember(KEYS.types, "resize")
        assert r.llen(KEYS.wake("resize")) == 4
        message = None
        for _ in range(50):  # bounded: at most ~5 s
            message = demand.get_message(timeout=0.1)
            if message is not None:
                break
        assert message is not None and message["data"] == b"resize"
    finally:
        demand.close()


def test_limit_above_total_releases_everything_and_creates_no_pending_list(
    r: redis.Redis,
) -> None:
    handle = submit_fanout(r, "resize", [{"n": i} for i in range(3)], limit=10, keys=KEYS)

    ready = _envelopes(r, KEYS.queue("resize", 5))
    assert [e["kwargs"] for e in ready] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [e["args"] for e in ready] == [[], [], []]
    assert not r.exists(KEYS.fanout_pending(handle.id))
    assert handle.status().running == 3


def test_a_call_argument_set_carries_both_positional_and_keyword_arguments(
    r: redis.Redis,
) -> None:
    submit_fanout(r, "resize", [Call(args=[1, 2], kwargs={"width": 64})], limit=1, keys=KEYS)

    [ready] = _envelopes(r, KEYS.queue("resize", 5))
    assert (ready["args"], ready["kwargs"]) == ([1, 2], {"width": 64})


def test_a_thousand_sub_tasks_are_submitted_in_one_call(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [[i] for i in range(1200)], limit=7, keys=KEYS)

    assert r.llen(KEYS.queue("resize", 5)) == 7
    assert r.llen(KEYS.fanout_pending(handle.id)) == 1193
    ids = {e["id"] for e in _envelopes(r, KEYS.fanout_pending(handle.id))}
    assert len(ids) == 1193


def test_empty_fan_out_is_done_at_once_with_zero_counts(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [], limit=3, keys=KEYS)

    assert handle.wait(timeout=5) == FanoutResult(handle.id, 0, 0, 0)
    assert r.llen(KEYS.queue("resize", 5)) == 0
    assert 0 < r.ttl(KEYS.fanout_done(handle.id)) <= 86400


def test_done_notice_ttl_follows_the_settings(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [], limit=1, settings=FanoutSettings(ttl_s=77), keys=KEYS)

    assert 0 < r.ttl(KEYS.fanout(handle.id)) <= 77
    assert 0 < r.ttl(KEYS.fanout_done(handle.id)) <= 77


def test_wait_times_out_while_sub_tasks_are_outstanding(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [[1], [2]], limit=1, keys=KEYS)

    with pytest.raises(FanoutTimeout):
        handle.wait(timeout=0.3)


def test_wait_on_an_unknown_fan_out_raises_at_once(r: redis.Redis) -> None:
    with pytest.raises(UnknownFanout):
        FanoutHandle.attach(r, "0" * 32, keys=KEYS).wait(timeout=30)


def test_every_waiter_sees_the_notice_because_waiting_does_not_consume_it(
    r: redis.Redis,
) -> None:
    handle = submit_fanout(r, "resize", [], limit=1, keys=KEYS)
    other = FanoutHandle.attach(r, handle.id, keys=KEYS)

    first, second = handle.wait(timeout=5), other.wait(timeout=5)
    assert first == second == FanoutResult(handle.id, 0, 0, 0)
    assert r.llen(KEYS.fanout_done(handle.id)) == 1


def test_subscribing_after_the_fan_out_finished_still_fires_once(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [], limit=1, keys=KEYS)
    seen: list[FanoutResult] = []

    subscription = handle.subscribe(seen.append)
    assert subscription.join(timeout=10)
    assert seen == [FanoutResult(handle.id, 0, 0, 0)]


def test_subscriber_is_woken_by_the_published_notice(r: redis.Redis) -> None:
    handle = submit_fanout(r, "resize", [[1]], limit=1, keys=KEYS)
    fired = threading.Event()
    seen: list[FanoutResult] = []

    def on_done(result: FanoutResult) -> None:
        seen.append(result)
        fired.set()

    subscription = handle.subscribe(on_done)
    try:
        notice = json.dumps({"id": handle.id, "total": 1, "succeeded": 0, "failed": 1})
        # Stand in for the worker's fail script: push, then publish, as it does.
        r.rpush(KEYS.fanout_done(handle.id), notice)
        for _ in range(100):  # bounded: publish until the subscriber is listening
            r.publish(KEYS.fanout_done(handle.id), notice)
            if fired.wait(0.1):
                break
        assert subscription.join(timeout=10)
    finally:
        subscription.stop()
    assert seen == [FanoutResult(handle.id, 1, 0, 1)]


def test_submit_rejects_a_limit_below_one(r: redis.Redis) -> None:
    with pytest.raises(ValueError, match="limit"):
        submit_fanout(r, "resize", [[1]], limit=0, keys=KEYS)
    assert r.dbsize() == 0


def test_submit_rejects_an_over_size_sub_task_before_writing_anything(r: redis.Redis) -> None:
    settings = FanoutSettings(max_payload_bytes=200)
    with pytest.raises(PayloadTooLarge, match="over the limit"):
        submit_fanout(r, "resize", [[1], ["x" * 500]], limit=1, settings=settings, keys=KEYS)
    assert r.dbsize() == 0


def test_submit_rejects_an_argument_set_that_is_a_string(r: redis.Redis) -> None:
    with pytest.raises(TypeError, match="argument set"):
        submit_fanout(r, "resize", ["abc"], limit=1, keys=KEYS)
