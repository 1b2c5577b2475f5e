"""Admin operations (taskscale.admin) against a real redis-server: each is one
atomic script that moves or deletes exactly what it says and keeps counters right."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from support.scripts import W, heartbeat
from taskscale import admin
from taskscale.fanout import submit_fanout
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def claim(r: redis.Redis, keys: Keys, k: int, *types: str) -> list[dict[str, Any]]:
    heartbeat(r, keys)
    reply = scripts_for(r).claim(
        keys=[keys.active, keys.workers, keys.inflight(W)],
        args=[keys.prefix, W, k, 0, *types],
        client=r,
    )
    return [json.loads(reply[i + 2]) for i in range(3, len(reply), 3)]


def kill(r: redis.Redis, keys: Keys, task: dict[str, Any], *, cap: int = 0, tb: str = "") -> None:
    """Record the task's final failure through fail.lua (as a worker does)."""
    head = [keys.prefix, task["id"], task["type"], 3, "dead", 0, "RuntimeError: boom"]
    assert scripts_for(r).fail(
        keys=[keys.active, keys.idle_since, keys.inflight(W)],
        args=[*head, "", 0, "", task.get("fanout", ""), cap, tb],
        client=r,
    )


def dead_letters(r: redis.Redis, keys: Keys, producer: Producer, n: int, **kw: Any) -> list[str]:
    ids = producer.enqueue_many("t", [(i,) for i in range(n)], max_retries=0)
    for task in claim(r, keys, n, "t"):
        kill(r, keys, task, **kw)
    return ids


def stat(r: redis.Redis, keys: Keys, name: str, task_type: str = "t") -> int:
    return int(r.hget(keys.stats(task_type), name) or 0)


def active(r: redis.Redis, keys: Keys, task_type: str = "t") -> int:
    return int(r.hget(keys.active, task_type) or 0)


# --- dead-letter cap -------------------------------------------------------------
def test_dead_letter_cap_drops_the_oldest_and_counts_them(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    ids = dead_letters(r, keys, producer, 5, cap=3)
    assert [d.task_id for d in admin.dead_list(r, keys, "t")] == ids[2:]
    assert stat(r, keys, "dead") == 5
    assert stat(r, keys, "dead_dropped") == 2


def test_dead_letter_record_keeps_the_traceback(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    dead_letters(r, keys, producer, 1, tb='File "x.py", line 3\nRuntimeError: boom')
    [d] = admin.dead_list(r, keys, "t")
    assert d.error == "RuntimeError: boom"
    assert d.traceback.endswith("RuntimeError: boom")
    assert d.fields["args"] == [0]


# --- dead requeue / purge ---------------------------------------------------------
def test_dead_requeue_by_id_moves_only_those_with_attempts_reset(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    ids = dead_letters(r, keys, producer, 3)
    retried = json.loads(r.lindex(keys.dead("t"), 1))  # type: ignore[arg-type]
    env = json.loads(retried["envelope"])
    env["attempts"] = 3  # as after three retries
    retried["envelope"] = json.dumps(env)
    r.lset(keys.dead("t"), 1, json.dumps(retried))
    r.hset(keys.active, "t", 7)  # a stand-in for tasks running elsewhere
    assert admin.dead_requeue(r, keys, "t", ids=[ids[1]]) == 1
    assert [d.task_id for d in admin.dead_list(r, keys, "t")] == [ids[0], ids[2]]
    [raw] = r.lrange(keys.queue("t"), 0, -1)
    env = json.loads(raw)
    assert env["id"] == ids[1] and env["attempts"] == 0 and env["args"] == [1]
    assert stat(r, keys, "dead_requeued") == 1
    assert active(r, keys) == 7, "ACTIVE_TASKS must not change"
    assert admin.dead_requeue(r, keys, "t", ids=[ids[1]]) == 0, "requeued exactly once"


def test_dead_requeue_keeps_empty_args_a_list_and_the_task_runs_again(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("t", max_retries=0)  # args [] and kwargs {}: cjson would confuse them
    [task] = claim(r, keys, 1, "t")
    kill(r, keys, task)
    assert admin.dead_requeue(r, keys, "t") == 1
    [again] = claim(r, keys, 1, "t")
    assert again["id"] == task["id"] and again["args"] == [] and again["kwargs"] == {}
    assert r.llen(keys.dead("t")) == 0


def test_dead_requeue_of_a_fanout_subtask_does_not_count_it_twice(
    r: redis.Redis, keys: Keys
) -> None:
    handle = submit_fanout(r, "t", [[1], [2]], limit=2, keys=keys)
    first, second = claim(r, keys, 2, "t")
    kill(r, keys, first)
    assert admin.dead_requeue(r, keys, "t") == 1
    [rerun] = claim(r, keys, 1, "t")
    kill(r, keys, rerun)  # the rerun fails again: not the fan-out's business any more
    assert handle.result() is None, "the fan-out is not done before its second sub-task"
    kill(r, keys, second)
    result = handle.result()
    assert result is not None and (result.succeeded, result.failed) == (0, 2)


def test_dead_purge_by_id_and_all(r: redis.Redis, keys: Keys, producer: Producer) -> None:
    ids = dead_letters(r, keys, producer, 4)
    assert admin.dead_purge(r, keys, "t", ids=[ids[0], "nosuchid"]) == 1
    assert admin.dead_purge(r, keys, "t") == 3
    assert r.llen(keys.dead("t")) == 0
    assert stat(r, keys, "dead_purged") == 4
    assert stat(r, keys, "dead") == 4, "dead is a monotonic counter"


def test_empty_id_list_is_an_error_not_all(r: redis.Redis, keys: Keys) -> None:
    with pytest.raises(ValueError, match="selects nothing"):
        admin.dead_purge(r, keys, "t", ids=[])


# --- delayed --------------------------------------------------------------------------
def test_delayed_run_now_and_delete(r: redis.Redis, keys: Keys, producer: Producer) -> None:
    a = producer.enqueue("t", "a", delay=3600)
    b = producer.enqueue("t", "b", delay=7200)
    assert [d.task_id for d in admin.delayed_list(r, keys, "t")] == [a, b]
    assert admin.delayed_run_now(r, keys, "t", b) is True
    [raw] = r.lrange(keys.queue("t"), 0, -1)
    assert json.loads(raw)["id"] == b and "due_ms" in json.loads(raw)
    assert admin.delayed_delete(r, keys, "t", a) is True
    assert admin.delayed_delete(r, keys, "t", a) is False
    assert r.zcard(keys.delayed("t")) == 0
    assert stat(r, keys, "purged") == 1
    assert stat(r, keys, "enqueued") == 2, "run-now is not a second enqueue"


# --- queue purge ---------------------------------------------------------------------
def test_queue_purge_deletes_every_ready_task_in_batches(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("t", [(i,) for i in range(admin.PURGE_BATCH * 2 + 5)])
    producer.enqueue("t", "urgent", priority=0)
    producer.enqueue("t", "later", delay=3600)
    producer.enqueue("other", "x")
    assert admin.queue_purge(r, keys, "t") == admin.PURGE_BATCH * 2 + 6
    assert all(r.llen(q) == 0 for q in keys.queues("t"))
    assert r.zcard(keys.delayed("t")) == 1, "delayed tasks stay unless asked"
    assert r.llen(keys.queue("other")) == 1
    assert stat(r, keys, "purged") == admin.PURGE_BATCH * 2 + 6
    assert admin.queue_purge(r, keys, "t", include_delayed=True) == 1


def test_queue_purge_of_fanout_subtasks_still_finishes_the_fanout(
    r: redis.Redis, keys: Keys
) -> None:
    handle = submit_fanout(r, "t", [[i] for i in range(5)], limit=2, keys=keys)
    assert admin.queue_purge(r, keys, "t") == 5  # 2 released + 3 released as slots pass on
    result = handle.result()
    assert result is not None and result.failed == 5


# --- forget ----------------------------------------------------------------------------
def test_forget_type_refuses_with_work_unless_forced(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("t", 1)
    producer.enqueue("t", 2, delay=60)
    found = admin.forget_type_checked(r, keys, "t")
    assert (found.forgotten, found.queued, found.delayed) == (False, 1, 1)
    assert r.sismember(keys.types, "t")
    assert admin.forget_type(r, keys, "t", force=True) is True
    assert not r.sismember(keys.types, "t")
    assert not r.exists(keys.stats("t"), keys.delayed("t"), keys.queue("t"))


def test_forget_type_always_refuses_while_a_task_runs(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue("t", 1)
    claim(r, keys, 1, "t")
    assert admin.forget_type(r, keys, "t", force=True) is False
    assert r.sismember(keys.types, "t")


# --- task lookup ---------------------------------------------------------------------------
def test_task_info_follows_a_task_through_its_states(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("t", [(i,) for i in range(50)])
    task_id = producer.enqueue("t", "x", priority=2, max_retries=0)
    info = admin.task_info(r, keys, task_id)
    assert info is not None and (info.state, info.task_type, info.where) == ("queued", "t", "2")
    [task] = claim(r, keys, 1, "t")
    assert task["id"] == task_id
    info = admin.task_info(r, keys, task_id)
    assert info is not None and (info.state, info.where) == ("running", W)
    kill(r, keys, task, tb="Traceback: here")
    info = admin.task_info(r, keys, task_id)
    assert info is not None and info.state == "dead" and info.traceback == "Traceback: here"
    later = producer.enqueue("t", delay=60)
    info = admin.task_info(r, keys, later, task_type="t")
    assert info is not None and info.state == "delayed" and info.due_ms
    assert admin.task_info(r, keys, "nosuchtask") is None


def test_task_info_reports_an_rpc_result_while_it_is_kept(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    r.rpush(keys.reply("abc"), json.dumps({"id": "abc", "ok": True, "result": [1, 2]}))
    info = admin.task_info(r, keys, "abc")
    assert info is not None and info.state == "done" and info.ok and info.result == [1, 2]


def test_task_info_says_when_its_scan_limit_was_reached(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("t", [(i,) for i in range(30)])
    with pytest.raises(admin.LookupLimitReached):
        admin.task_info(r, keys, "nosuchtask", limit=10)


def test_purge_and_delayed_delete_release_unique_keys(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    first = producer.enqueue("t", 1, unique_key="k1")
    later = producer.enqueue("t", 2, unique_key="k2", delay=60)
    assert producer.enqueue("t", 1, unique_key="k1") == first, "held while queued"
    admin.queue_purge(r, keys, "t")
    assert admin.delayed_delete(r, keys, "t", later)
    assert producer.enqueue("t", 1, unique_key="k1") != first
    assert producer.enqueue("t", 2, unique_key="k2") != later
