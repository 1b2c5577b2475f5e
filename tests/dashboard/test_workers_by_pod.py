"""The workers page groups worker processes by pod (``taskscale worker
--processes P`` registers one worker per process, all with one pod name)
and gives each pod its total: real Redis, real workers in this process."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
import redis
from dashhelpers import KEYS, dashboard, get

from support.waiting import wait_until
from support.workers import running_worker
from taskscale.worker import RetryPolicy, Worker

pytestmark = pytest.mark.integration


@contextmanager
def worker(url: str, worker_id: str, pod: str, threads: int) -> Iterator[Worker]:
    with running_worker(
        url,
        ("sleep",),
        threads=threads,
        keys=KEYS,
        worker_id=worker_id,
        pod=pod,
        retry=RetryPolicy(),
    ) as running:
        yield running


def test_the_workers_page_sorts_processes_by_pod_and_sums_each_pod(
    redis_url: str, r: redis.Redis
) -> None:
    with ExitStack() as stack:
        for worker_id, pod, threads in [
            ("z-0", "pod-a", 2),
            ("b-0", "pod-b", 3),
            ("z-1", "pod-a", 4),
        ]:
            stack.enter_context(worker(redis_url, worker_id, pod, threads))
        wait_until(lambda: r.zcard(KEYS.workers) == 3)
        d = stack.enter_context(dashboard(redis_url))
        _, api, _ = get(d.url, "/api/workers")
        code, page, _ = get(d.url, "/workers")
    assert [w["id"] for w in api["workers"]] == ["z-0", "z-1", "b-0"]
    assert api["pods"] == [
        {"pod": "pod-a", "processes": 2, "busy": 0, "threads": 6},
        {"pod": "pod-b", "processes": 1, "busy": 0, "threads": 3},
    ]
    assert code == 200
    assert "<tr><td>pod-a</td><td>2</td><td>0/6</td></tr>" in page


def test_a_worker_whose_lease_expired_and_is_not_reaped_is_shown_dead_unreaped(
    redis_url: str, r: redis.Redis
) -> None:
    """No scheduler runs here, so nothing reaps: a workers-zset member whose
    lease is a minute old stays listed, marked and struck through, beside a
    live worker; one whose registry record already expired is marked too."""
    now_ms = int(time.time() * 1000)
    r.zadd(KEYS.workers, {"gone-0": now_ms - 60_000, "vanished-0": now_ms - 60_000})
    r.hset(
        KEYS.worker("gone-0"),
        mapping={
            "pod": "pod-gone",
            "types": "sleep",
            "threads": 2,
            "heartbeat_ms": now_ms - 70_000,
        },
    )
    with worker(redis_url, "live-0", "pod-live", 2), dashboard(redis_url) as d:
        wait_until(lambda: r.zcard(KEYS.workers) == 3)
        _, api, _ = get(d.url, "/api/workers")
        _, page, _ = get(d.url, "/workers")
    state = {w["id"]: w["dead_unreaped"] for w in api["workers"]}
    assert state == {"live-0": False, "gone-0": True, "vanished-0": True}
    assert '<tr class="dead" data-worker="gone-0">' in page
    assert '<tr class="" data-worker="live-0">' in page
    assert page.count("dead, not yet reaped") == 2
