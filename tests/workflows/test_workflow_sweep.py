"""The scheduler's sweep: a workflow whose step's task was lost is ended
with a reason; a step whose task is queued, delayed (a retry) or in flight
(a live or dead worker's) is not lost.  And the counters the metrics show."""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.scripts import W, claim, heartbeat
from support.waiting import wait_until
from support.workers import running_scheduler
from taskscale.keys import Keys
from taskscale.scheduling.scheduler_metrics import SchedulerMetrics
from taskscale.workflows import chain, group, read
from taskscale.workflows.state import cancel
from taskscale.workflows.sweep import sweep

KEYS = Keys("taskscale")


def swept(r: redis.Redis) -> list[tuple[str, str]]:
    time.sleep(0.06)
    return sweep(r, KEYS, lost_after_s=0.05).ended


def test_a_step_whose_task_was_removed_ends_its_workflow_with_a_reason(r: redis.Redis) -> None:
    wf = chain("a", "b").enqueue(client=r, keys=KEYS)
    r.delete(KEYS.queue("a"))  # an operator purged the queue
    assert swept(r) == [(wf, f"step s0 (a) was lost: its task {wf}.s0 is in no ready list, "
                             "delayed set or worker")]  # fmt: skip
    got = read(wf, client=r, keys=KEYS)
    assert (
        got is not None and got.state == "failed" and got.reason.startswith("step s0 (a) was lost")
    )
    assert [s.state for s in got.steps] == ["ready", "cancelled"]
    assert r.zcard(KEYS.workflows) == 0
    assert swept(r) == []


def test_a_queued_delayed_or_running_step_is_not_lost(r: redis.Redis) -> None:
    queued = chain("a").enqueue(client=r, keys=KEYS)
    running = chain("b").enqueue(client=r, keys=KEYS)
    delayed = chain("c").enqueue(client=r, keys=KEYS)
    heartbeat(r, KEYS, lease_ms=300)
    claim(r, KEYS, 1, "b")
    time.sleep(0.35)  # now a worker whose lease has run out, not yet reaped
    (c,) = [json.loads(e) for e in r.lrange(KEYS.queue("c"), 0, -1)]
    r.delete(KEYS.queue("c"))
    c["attempts"] = 1  # a retry's envelope: not the text the workflow released
    r.zadd(KEYS.delayed("c"), {json.dumps(c): time.time() * 1000 + 60_000})
    assert swept(r) == []
    assert {read(w, client=r, keys=KEYS).state for w in (queued, running, delayed)} == {"running"}  # type: ignore[union-attr]
    r.hdel(KEYS.inflight(W), f"{running}.s0")
    assert [w for w, _ in swept(r)] == [running]


def test_a_young_workflow_is_not_looked_at(r: redis.Redis) -> None:
    chain("a").enqueue(client=r, keys=KEYS)
    r.delete(KEYS.queue("a"))
    assert sweep(r, KEYS, lost_after_s=30).ended == []


def test_counters_started_finished_and_steps_waiting(r: redis.Redis) -> None:
    wf = chain("a", group("b", "c"), "d").enqueue(client=r, keys=KEYS)
    chain("x").enqueue(client=r, keys=KEYS)
    result = sweep(r, KEYS)
    assert result.totals == {"started": 2, "steps_waiting": 3}  # b, c, d wait on a parent
    assert result.running == 2
    cancel(wf, client=r, keys=KEYS)
    result = sweep(r, KEYS)
    assert result.totals == {"started": 2, "steps_waiting": 0, "cancelled": 1}
    assert result.running == 1


@pytest.mark.parametrize("bad", [0, -1, float("nan")])
def test_a_bad_bound_is_refused(r: redis.Redis, bad: float) -> None:
    with pytest.raises(ValueError, match="lost_after_s"):
        sweep(r, KEYS, lost_after_s=bad)


def test_the_scheduler_ends_a_lost_workflow_and_shows_the_counters(
    redis_url: str, r: redis.Redis
) -> None:
    wf = chain("a", "b").enqueue(client=r, keys=KEYS)
    r.delete(KEYS.queue("a"))
    metrics = SchedulerMetrics(lease_s=0.4)
    with running_scheduler(
        redis_url, keys=KEYS, metrics=metrics, lease_s=0.4, workflow_lost_after_s=0.2
    ):
        wait_until(lambda: read(wf, client=r, keys=KEYS).state == "failed", timeout=10)  # type: ignore[union-attr]
        wait_until(lambda: metrics.workflows_lost._value.get() == 1, timeout=10)
    assert metrics.workflow_totals.labels("failed")._value.get() == 1
    assert metrics.workflows_running._value.get() == 0
