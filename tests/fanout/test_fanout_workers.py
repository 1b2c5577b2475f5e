"""Fan-out end to end: real worker processes, a real scheduler, a real kill.

The concurrency limit is observed from inside the task bodies (see
tests/support/fanout_tasks.py), with two worker processes of three threads
each, so the workers could run six at once and only the fan-out's slots hold
it to three.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import redis

from support.fanout_tasks import FINISHED, HANG_ENV, MAX_SEEN, RUNNING, STARTS
from support.waiting import wait_until
from support.workers import kill, processes, start_scheduler, start_worker, stop, text
from taskscale.fanout import FanoutResult, FanoutSettings, submit_fanout
from taskscale.keys import Keys
from taskscale.rpc import call

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = Keys("taskscale")
TASKS = ["support.fanout_tasks"]


def _finished_by(r: redis.Redis, tag: str) -> Counter[str]:
    """How many sub-tasks each worker pid finished."""
    return Counter(text(raw).split(":")[1] for raw in r.lrange(FINISHED.format(tag=tag), 0, -1))


def _assert_settled(r: redis.Redis, fanout_id: str, task_type: str) -> None:
    """No slot leaked, nothing left behind, nothing counted as still active."""
    assert r.hget(KEYS.fanout(fanout_id), "running") == b"0"
    assert r.llen(KEYS.fanout_pending(fanout_id)) == 0
    assert int(r.hget(KEYS.active, task_type) or 0) == 0
    assert all(r.llen(q) == 0 for q in KEYS.queues(task_type))


def test_200_sub_requests_with_limit_3_never_run_more_than_3_at_once_across_two_workers(
    redis_url: str, r: redis.Redis
) -> None:
    tag = "limit"
    workers = [
        start_worker(redis_url, types="fo.track", imports=TASKS, threads=3) for _ in range(2)
    ]
    with processes(*workers):
        wait_until(lambda: r.zcard(KEYS.workers) == 2)
        arg_sets = [{"i": i, "tag": tag, "sleep_s": 0.03} for i in range(200)]
        handle = submit_fanout(r, "fo.track", arg_sets, limit=3, keys=KEYS)
        result = handle.wait(timeout=240)

    assert result == FanoutResult(handle.id, total=200, succeeded=200, failed=0)
    max_seen = int(r.zscore(MAX_SEEN.format(tag=tag), "max") or 0)
    assert 2 <= max_seen <= 3, f"{max_seen} sub-tasks ran at once"
    assert r.get(RUNNING.format(tag=tag)) == b"0"
    starts = r.hgetall(STARTS.format(tag=tag))
    assert len(starts) == 200 and set(starts.values()) == {b"1"}
    by_worker = _finished_by(r, tag)
    assert len(by_worker) == 2, f"both workers must take part, got {dict(by_worker)}"
    _assert_settled(r, handle.id, "fo.track")


def test_completion_is_notified_exactly_once_to_waiters_and_subscribers(
    redis_url: str, r: redis.Redis
) -> None:
    listener = r.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    worker = start_worker(redis_url, types="fo.track", imports=TASKS, threads=3)
    with processes(worker):
        arg_sets = [{"i": i, "tag": "notify", "sleep_s": 0.0} for i in range(40)]
        handle = submit_fanout(r, "fo.track", arg_sets, limit=4, keys=KEYS)
        listener.subscribe(handle.channel)
        callbacks: list[FanoutResult] = []
        subscription = handle.subscribe(callbacks.append)
        result = handle.wait(timeout=120)
        assert subscription.join(timeout=30)
    # Collect every notice published on the channel for a while after the end.
    notices = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        message = listener.get_message(timeout=0.1)
        if message is not None:
            notices.append(json.loads(message["data"]))
    listener.close()

    expected = FanoutResult(handle.id, total=40, succeeded=40, failed=0)
    assert result == expected
    assert callbacks == [expected]
    assert notices == [{"id": handle.id, "total": 40, "succeeded": 40, "failed": 0}]
    assert r.llen(KEYS.fanout_done(handle.id)) == 1
    assert handle.wait(timeout=5) == expected  # the notice is still there for others


def test_another_request_of_the_same_type_is_not_held_up_by_a_large_fan_out(
    redis_url: str, r: redis.Redis
) -> None:
    workers = [
        start_worker(redis_url, types="fo.track,fo.peek", imports=TASKS, threads=3)
        for _ in range(2)
    ]
    with processes(*workers):
        wait_until(lambda: r.zcard(KEYS.workers) == 2)
        big = submit_fanout(
            r,
            "fo.track",
            [{"i": i, "tag": "big", "sleep_s": 0.1} for i in range(200)],
            limit=3,
            keys=KEYS,
        )
        small = submit_fanout(
            r, "fo.track", [{"i": i, "tag": "small"} for i in range(6)], limit=6, keys=KEYS
        )
        small_result = small.wait(timeout=120)
        big_done_when_small_finished = big.status().succeeded
        succeeded_seen_by_rpc = call(r, "fo.peek", KEYS.fanout(big.id), timeout=60, keys=KEYS)
        big_result = big.wait(timeout=240)

    assert small_result.succeeded == 6
    # 200 sub-tasks of >= 0.1 s, 3 at a time, take >= 6.7 s; the others did not wait for them.
    assert big_done_when_small_finished < 200
    assert succeeded_seen_by_rpc < 200
    assert big_result.succeeded == 200
    assert int(r.zscore(MAX_SEEN.format(tag="big"), "max") or 0) <= 3
    _assert_settled(r, big.id, "fo.track")


def test_failed_and_retried_sub_tasks_are_counted_and_keep_their_slot(
    redis_url: str, r: redis.Redis
) -> None:
    tag = "retry"
    worker = start_worker(redis_url, types="fo.track,fo.always_fail", imports=TASKS, threads=4)
    with processes(worker, start_scheduler(redis_url)):
        flaky = submit_fanout(
            r,
            "fo.track",
            [{"i": i, "tag": tag, "fail_first": i % 3 == 0} for i in range(12)],
            limit=2,
            settings=FanoutSettings(max_retries=1),
            keys=KEYS,
        )
        doomed = submit_fanout(
            r,
            "fo.always_fail",
            [[i] for i in range(5)],
            limit=2,
            settings=FanoutSettings(max_retries=0),
            keys=KEYS,
        )
        flaky_result = flaky.wait(timeout=120)
        doomed_result = doomed.wait(timeout=120)

    assert flaky_result == FanoutResult(flaky.id, total=12, succeeded=12, failed=0)
    assert doomed_result == FanoutResult(doomed.id, total=5, succeeded=0, failed=5)
    starts = {int(k): int(v) for k, v in r.hgetall(STARTS.format(tag=tag)).items()}
    assert starts == {i: 2 if i % 3 == 0 else 1 for i in range(12)}
    # A sub-task waiting in the delayed set for its retry still held its slot.
    assert int(r.zscore(MAX_SEEN.format(tag=tag), "max") or 0) <= 2
    assert r.hget(KEYS.stats("fo.track"), "retried") == b"4"
    assert r.llen(KEYS.dead("fo.always_fail")) == 5
    _assert_settled(r, flaky.id, "fo.track")
    _assert_settled(r, doomed.id, "fo.always_fail")


def test_sub_requests_of_a_killed_worker_run_again_and_release_their_slots(
    redis_url: str, r: redis.Redis
) -> None:
    tag = "kill"
    doomed = start_worker(
        redis_url,
        types="fo.track",
        imports=TASKS,
        threads=2,
        lease=2.0,
        heartbeat=0.5,
        env={HANG_ENV: "1"},
    )
    with processes(doomed):
        wait_until(lambda: r.zcard(KEYS.workers) == 1)
        doomed_id = text(r.zrange(KEYS.workers, 0, 0)[0])
        handle = submit_fanout(
            r, "fo.track", [{"i": i, "tag": tag} for i in range(10)], limit=2, keys=KEYS
        )
        # Both slots are taken by sub-tasks hanging in the doomed worker.
        wait_until(lambda: r.hlen(KEYS.inflight(doomed_id)) == 2)
        wait_until(lambda: r.hlen(STARTS.format(tag=tag)) == 2)
        kill(doomed)
        # The killed runs never decremented the test's own counter: start it afresh.
        r.delete(RUNNING.format(tag=tag), MAX_SEEN.format(tag=tag))
        hung = sorted(int(k) for k in r.hkeys(STARTS.format(tag=tag)))
        assert handle.status().running == 2
        assert int(r.hget(KEYS.active, "fo.track") or 0) == 2

        rescuer = start_worker(redis_url, types="fo.track", imports=TASKS, threads=4)
        with processes(rescuer, start_scheduler(redis_url, lease=2.0)):
            result = handle.wait(timeout=120)
        stop(doomed)

    assert result == FanoutResult(handle.id, total=10, succeeded=10, failed=0)
    starts = {int(k): int(v) for k, v in r.hgetall(STARTS.format(tag=tag)).items()}
    assert starts == {i: 2 if i in hung else 1 for i in range(10)}
    assert int(r.hget(KEYS.stats("fo.track"), "requeued") or 0) == 2
    assert int(r.zscore(MAX_SEEN.format(tag=tag), "max") or 0) <= 2
    assert not r.zscore(KEYS.workers, doomed_id)
    assert not r.exists(KEYS.inflight(doomed_id))
    _assert_settled(r, handle.id, "fo.track")


def test_sub_requests_of_a_worker_stopped_past_its_grace_go_back_and_keep_their_slots(
    redis_url: str, r: redis.Redis
) -> None:
    tag = "term"
    stuck = start_worker(
        redis_url, types="fo.track", imports=TASKS, threads=2, grace=0.5, env={HANG_ENV: "1"}
    )
    with processes(stuck):
        handle = submit_fanout(
            r, "fo.track", [{"i": i, "tag": tag} for i in range(6)], limit=2, keys=KEYS
        )
        wait_until(lambda: r.hlen(STARTS.format(tag=tag)) == 2)
        stop(stuck)  # SIGTERM: the grace period ends with both sub-tasks still running
        assert stuck.returncode == 0
        # The abandoned runs never decremented the test's own counter: start it afresh.
        r.delete(RUNNING.format(tag=tag), MAX_SEEN.format(tag=tag))
        assert r.llen(KEYS.queue("fo.track")) == 2
        assert handle.status().running == 2
        with processes(start_worker(redis_url, types="fo.track", imports=TASKS, threads=4)):
            result = handle.wait(timeout=120)

    assert result == FanoutResult(handle.id, total=6, succeeded=6, failed=0)
    assert int(r.zscore(MAX_SEEN.format(tag=tag), "max") or 0) <= 2
    _assert_settled(r, handle.id, "fo.track")
