"""Task options (max_retries, retry backoff, run timeout, result TTL) as
``@task`` defaults and per enqueue, with real ``taskscale worker`` processes.

The task functions and their declared defaults are in ``options_tasks``,
which only the worker processes import: the producer here never sees the
decorators, as in production.
"""

from __future__ import annotations

import json

import pytest
import redis
from options_tasks import ATTEMPTS, EVENTS

from support.waiting import wait_until
from support.workers import processes, start_scheduler, start_worker, text
from taskscale.keys import Keys
from taskscale.options import TaskOptions, resolve
from taskscale.producer import Producer
from taskscale.rpc import CallOptions, TaskTimeout, call_async

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = Keys("taskscale")
TASKS = ["options_tasks"]


def _attempt_times(r: redis.Redis, tag: str) -> list[float]:
    return [float(text(t)) for t in r.lrange(ATTEMPTS.format(tag=tag), 0, -1)]


def _events(r: redis.Redis, tag: str) -> list[str]:
    return [text(e) for e in r.lrange(EVENTS.format(tag=tag), 0, -1)]


def _dead(r: redis.Redis, task_type: str) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in r.lrange(KEYS.dead(task_type), 0, -1)]


def test_max_retries_per_enqueue_overrides_the_decorators(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    worker = start_worker(redis_url, types="opt.flaky", imports=TASKS, threads=2)
    with processes(worker, start_scheduler(redis_url)):
        producer.enqueue("opt.flaky", "declared")  # @task(max_retries=0): one attempt
        producer.enqueue(
            "opt.flaky",
            "override",
            options=TaskOptions(max_retries=2, retry_backoff=0.05),
        )
        wait_until(lambda: r.llen(KEYS.dead("opt.flaky")) == 2, timeout=60)
    assert len(_attempt_times(r, "declared")) == 1
    assert len(_attempt_times(r, "override")) == 3
    envelopes = [json.loads(str(d["envelope"])) for d in _dead(r, "opt.flaky")]
    assert {e["args"][0]: e["attempts"] for e in envelopes} == {"declared": 0, "override": 2}
    stats = r.hgetall(KEYS.stats("opt.flaky"))
    assert (int(stats[b"failed"]), int(stats[b"retried"]), int(stats[b"dead"])) == (4, 2, 2)


def test_a_retry_schedule_sets_the_delay_before_each_retry(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    worker = start_worker(redis_url, types="opt.flaky", imports=TASKS)
    with processes(worker, start_scheduler(redis_url)):
        producer.enqueue(
            "opt.flaky",
            "schedule",
            options=TaskOptions(max_retries=2, retry_backoff=[0.1, 3.0]),
        )
        wait_until(lambda: r.llen(KEYS.dead("opt.flaky")) == 1, timeout=60)
    first, second, third = _attempt_times(r, "schedule")
    # The worker's own policy would wait about 1 s, then about 2 s.
    assert 0.1 <= second - first < 0.9, second - first
    assert third - second >= 3.0, third - second


def test_a_task_over_its_timeout_is_failed_and_the_worker_goes_on(
    redis_url: str, r: redis.Redis
) -> None:
    producer = Producer(r, keys=KEYS)
    worker = start_worker(redis_url, types="opt.slow,opt.quick", imports=TASKS, threads=1)
    with processes(worker):
        slow_id = producer.enqueue("opt.slow", "slow")  # @task(timeout=1.0), runs 30 s
        producer.enqueue("opt.quick", "quick")
        wait_until(lambda: r.llen(KEYS.dead("opt.slow")) == 1, timeout=20)
        # One thread: the quick task runs only because the slow one was stopped.
        wait_until(lambda: _events(r, "quick") == ["done"], timeout=20)
        # Per enqueue, the timeout can be raised: this one runs to its end.
        producer.enqueue("opt.slow", "longer", seconds=1.5, options=TaskOptions(timeout=20))
        wait_until(lambda: "cleanup" in _events(r, "longer"), timeout=20)
    [dead] = _dead(r, "opt.slow")
    assert json.loads(str(dead["envelope"]))["id"] == slow_id
    assert str(dead["error"]).startswith("RunTimeout: ")
    assert _events(r, "slow") == ["started", "cleanup"]  # interrupted; its finally ran
    assert _events(r, "longer") == ["started", "finished", "cleanup"]
    assert int(r.hget(KEYS.active, "opt.slow") or 0) == 0


def test_a_blocking_c_call_is_not_interrupted_but_the_run_still_fails(
    redis_url: str, r: redis.Redis
) -> None:
    producer = Producer(r, keys=KEYS)
    worker = start_worker(redis_url, types="opt.blocking", imports=TASKS, threads=1)
    with processes(worker):
        producer.enqueue("opt.blocking", "c-call", 2.0)  # time.sleep(2) with a 0.5 s timeout
        wait_until(lambda: r.llen(KEYS.dead("opt.blocking")) == 1, timeout=30)
    [started] = _attempt_times(r, "c-call")
    [dead] = _dead(r, "opt.blocking")
    assert str(dead["error"]).startswith("RunTimeout: ")
    # Failed when the sleep returned after its full 2 s, not at the 0.5 s timeout.
    assert int(str(dead["failed_ms"])) / 1000 - started >= 1.9


def test_the_result_ttl_of_the_decorator_and_of_the_call_are_honoured(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(redis_url, types="opt.answer", imports=TASKS)
    with processes(worker):
        declared = call_async(r, "opt.answer", 1, keys=KEYS)  # @task(result_ttl=2)
        per_call = call_async(r, "opt.answer", 2, options=CallOptions(reply_ttl_s=60), keys=KEYS)
        wait_until(lambda: declared.ready() and per_call.ready())
    assert 0 < r.pttl(declared.reply_key) <= 2000
    assert 2000 < r.pttl(per_call.reply_key) <= 60_000
    wait_until(lambda: not r.exists(declared.reply_key), timeout=10)
    with pytest.raises(TaskTimeout):
        declared.get(timeout=0)  # the unread reply expired
    assert per_call.get(timeout=0) == 2


def test_options_resolve_envelope_then_decorator_then_default() -> None:
    declared = TaskOptions(max_retries=0, retry_backoff=[1, 2], timeout=9, result_ttl=5)
    assert resolve({}, None).max_retries == 3
    got = resolve({}, declared)
    assert (got.max_retries, got.backoff_schedule_s, got.timeout, got.result_ttl) == (
        0,
        (1, 2),
        9,
        5,
    )
    fields = TaskOptions(max_retries=4, retry_backoff=0.5, timeout=2, result_ttl=7)
    got = resolve(fields.envelope_fields(), declared)
    assert (got.max_retries, got.backoff_base_s, got.backoff_schedule_s) == (4, 0.5, None)
    assert (got.timeout, got.result_ttl) == (2, 7)
    assert resolve({"max_retries": "x", "timeout_ms": -1}, declared).max_retries == 0
    # remembered per declared object: another one (even an equal one made
    # later, or one at a reused address) is resolved for itself
    for retries in range(5):
        assert resolve({"id": "t"}, TaskOptions(max_retries=retries)).max_retries == retries
    assert resolve({"id": "t"}, None).max_retries == 3
    with pytest.raises(ValueError, match="timeout"):
        TaskOptions(timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        TaskOptions(max_retries=-1)
