"""History kept in Redis (taskscale.history): real workers' counts equal the
tasks they ran, a scheduler samples queued/running once per bucket, the
percentiles come from the log-scale bins, a bucket's memory is bounded and
`taskscale stats` prints it (and refuses a malformed window)."""

from __future__ import annotations

import argparse
import json

import pytest
import redis

from support.waiting import wait_until
from support.workers import processes, run_taskscale, start_scheduler, start_worker, stop
from taskscale import history
from taskscale.cli.stats import since
from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.producer import Producer
from taskscale.server_clock import server_time

pytestmark = pytest.mark.integration


def _rows(r: redis.Redis, keys: Keys, task_type: str) -> list[history.Row]:
    return history.read(r, keys, [task_type], 600, now_ms=server_time(r, keys).ms)


def test_real_workers_counts_equal_the_tasks_they_ran(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("noop", [[i] for i in range(40)])
    producer.enqueue_many("fail", [["on purpose"] for _ in range(7)], max_retries=0)
    producer.enqueue_many("sleep", [[0.05] for _ in range(6)])
    workers = [
        # heartbeat 20 s: the test ends before the first beat, so all it sees
        # is what each reporter writes on its way out
        start_worker(
            redis_url,
            types="noop,fail,sleep",
            imports=["taskscale.examples"],
            lease=30.0,
            heartbeat=20.0,
            env={"TASKSCALE_RECENT_CAP": "5"},
        )
        for _ in range(2)
    ]
    with processes(*workers):
        wait_until(lambda: r.llen(keys.dead("fail")) == 7)
        wait_until(lambda: int(r.hget(keys.stats("noop"), "completed") or 0) == 40)
        wait_until(lambda: int(r.hget(keys.stats("sleep"), "completed") or 0) == 6)
        for w in workers:
            stop(w)
    noop, fail, sleep = (_rows(r, keys, t) for t in ("noop", "fail", "sleep"))
    assert sum(x.completed for x in noop) == 40
    assert (sum(x.failed for x in noop), sum(x.dead for x in noop)) == (0, 0)
    assert sum(x.completed for x in fail) == 0
    assert (sum(x.failed for x in fail), sum(x.dead for x in fail)) == (7, 7)
    assert sum(x.completed for x in sleep) == 6
    # every run is in the run-time histogram, every run's wait in the wait one
    assert sum(sum(x.run_hist.values()) for x in noop) == 40
    assert sum(sum(x.wait_hist.values()) for x in fail) == 7
    # the sleep tasks ran 50 ms: p50 within one bin (41 %) of it, in each
    # 10 s bucket they completed in (the six can straddle a bucket's edge)
    busy = [x for x in sleep if x.completed]
    assert 1 <= len(busy) <= 2
    assert all(x.run_p50_ms is not None and 45 <= x.run_p50_ms <= 80 for x in busy)
    overall = history.read(r, keys, ["noop", "fail", "sleep"], 600, now_ms=server_time(r, keys).ms)
    assert sum(x.completed for x in overall) == 46
    # the recent runs: capped at 5 per type, newest first, outcome and result kept
    assert r.llen(keys.recent("noop")) == 5
    assert r.llen(keys.recent("fail")) == 5
    [last_fail] = [json.loads(x) for x in r.lrange(keys.recent("fail"), 0, 0)]
    assert last_fail["outcome"] == "dead" and "on purpose" in last_fail["result"]
    sleeps = [json.loads(x) for x in r.lrange(keys.recent("sleep"), 0, -1)]
    assert all(s["outcome"] == "completed" and s["result"] == "0.05" for s in sleeps)
    assert all(s["ms"] >= 45 for s in sleeps)
    done = run_taskscale(redis_url, "stats", "noop", "--since", "10m", "--json", check=True)
    printed = json.loads(done.stdout)
    assert sum(row["completed"] for row in printed["rows"]) == 40
    assert len(printed["rows"]) == 60
    text = run_taskscale(redis_url, "stats", "fail", "--since", "1h", check=True).stdout
    assert text.startswith("fail: 0 completed, 7 failed, 7 dead in the last 3600 s")


def test_a_scheduler_samples_queued_and_running_once_per_bucket(
    redis_url: str, r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    producer.enqueue_many("noop", [[i] for i in range(5)])
    producer.enqueue_many("noop", [[i] for i in range(3)], priority="high")
    producer.enqueue("idle")
    r.delete(keys.queue("idle"))  # a known type with nothing queued or running
    r.hset(keys.active, "noop", 2)
    with processes(start_scheduler(redis_url)):
        wait_until(lambda: any(x.queued for x in _rows(r, keys, "noop")))
    [sampled] = [x for x in _rows(r, keys, "noop") if x.queued]
    assert (sampled.queued, sampled.running) == (8, 2)
    assert r.keys(keys.prefix + "history:idle:*") == []  # idle types cost nothing
    # a second call in the same bucket does nothing (unless the bucket turned)
    bucket = int(r.get(keys.history_sampled) or 0)
    if bucket == history.current_bucket(server_time(r, keys).ms):
        assert history.sample(r, keys) == 0


def test_percentiles_from_the_bins() -> None:
    assert history.bin_of(0) == 0 and history.bin_of(0.5) == 0
    assert history.bin_of(1) == 1 and history.bin_of(1.5) == 2
    assert history.bin_of(10**12) == history.BINS - 1
    # the lookup of whole ms agrees with the logarithm it was built from
    assert all(history.bin_of(ms) == history.bin_of(ms + 0.0) for ms in range(9000))
    assert history.percentile({}, 0.5) is None
    hist: dict[int, int] = {}
    for ms in [10] * 90 + [1000] * 10:
        b = history.bin_of(ms)
        hist[b] = hist.get(b, 0) + 1
    p50, p95 = history.percentile(hist, 0.5), history.percentile(hist, 0.95)
    assert p50 is not None and 10 / 1.42 <= p50 <= 10 * 1.42
    assert p95 is not None and 1000 / 1.42 <= p95 <= 1000 * 1.42


def test_a_full_bucket_stays_small(r: redis.Redis, keys: Keys) -> None:
    """The memory bound docs/schema.md states: a bucket with every count, both
    samples and 12 bins of each histogram in use."""
    batch = history.Batch()
    for i in range(12):
        for _ in range(1000):
            batch.add("t", "ok", 2**i, 2**i)
            batch.add("t", "dead", 2**i, 2**i)
    history.write(r, keys, batch)
    assert batch.counts == {}
    history.sample(r, keys)
    [key] = r.keys(keys.prefix + "history:t:*")
    assert r.ttl(key) > history.KEEP_S - 60
    used = int(r.memory_usage(key) or 0)
    print(f"bytes per full bucket: {used}")
    assert 0 < used <= 400


@pytest.mark.parametrize("window", ["abc", "", "0s", "5s", "25h", "2d", "-1h", "1.5h", "1w"])
def test_a_malformed_window_is_refused(window: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        since(window)


def test_windows() -> None:
    assert [since(w) for w in ("10s", "90", "15m", "15min", "1h", "24h", "1d")] == [
        10, 90, 900, 900, 3600, 86400, 86400,
    ]  # fmt: skip


def test_stats_says_which_flag_is_wrong(redis_url: str) -> None:
    done = run_taskscale(redis_url, "stats", "noop", "--since", "2d")
    assert done.returncode == 2
    assert "--since" in done.stderr and "between 10s and 24h" in done.stderr


def test_history_read_refuses_more_than_a_day(r: redis.Redis, keys: Keys) -> None:
    with pytest.raises(redis.ResponseError, match="at most 8640 buckets per type"):
        bound_script(r, "history_read")(keys=[keys.types], args=[keys.prefix, 1, 9000, "all", "t"])


def test_the_recent_list_keeps_its_cap_and_stays_small(r: redis.Redis, keys: Keys) -> None:
    """The memory docs/schema.md states for ``recent:T`` at the default cap:
    100 records of a 32-hex id, a 200-character result."""
    batch = history.Batch(recent_cap=100)
    for i in range(250):
        batch.finished("t", (f"{i:032x}", "completed", 12, 1 << 40, "r" * 200))
    history.write(r, keys, batch)
    assert r.llen(keys.recent("t")) == 100
    newest = json.loads(r.lindex(keys.recent("t"), 0) or b"{}")
    assert newest["id"] == f"{249:032x}"
    used = int(r.memory_usage(keys.recent("t")) or 0)
    print(f"bytes of recent:T at 100 records: {used}")
    assert 0 < used <= 40_000
