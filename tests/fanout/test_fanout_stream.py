"""Streamed fan-out: open, add in several calls while earlier sub-tasks run,
close; results collected in submission order, with a size limit and a TTL.

The script-level tests need no worker; the end-to-end ones run real
``taskscale worker`` processes and observe the limit from inside the tasks
(``fo.square`` of tests/support/fanout_tasks.py).
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from support.fanout_tasks import FINISHED, HANG_ENV, MAX_SEEN, RUNNING, STARTS
from support.waiting import wait_until
from support.workers import kill, processes, start_scheduler, start_worker
from taskscale.cli import main
from taskscale.fanout import FanoutHandle, FanoutTimeout, UnknownFanout
from taskscale.fanout_stream import (
    FanoutClosed,
    FanoutStream,
    ResultsExpired,
    StreamSettings,
    open_fanout,
)
from taskscale.keys import Keys
from taskscale.options import TaskOptions

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")
TASKS = ["support.fanout_tasks"]


def _envelopes(r: redis.Redis, key: str) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in r.lrange(key, 0, -1)]


def _finished(r: redis.Redis, tag: str) -> int:
    return int(r.llen(FINISHED.format(tag=tag)))


# --- the scripts, no worker -------------------------------------------------


def test_the_limit_holds_across_adds_and_positions_follow_submission_order(
    r: redis.Redis,
) -> None:
    stream = open_fanout(r, "resize", limit=2, keys=KEYS)
    first = stream.add([[0], [1], [2]])
    second = stream.add([{"n": 3}, {"n": 4}])

    ready = _envelopes(r, KEYS.queue("resize"))
    pending = _envelopes(r, KEYS.fanout_pending(stream.id))
    assert [e["id"] for e in ready] == first[:2]
    assert [e["id"] for e in pending] == first[2:] + second
    assert [e["fanout_seq"] for e in ready + pending] == [0, 1, 2, 3, 4]
    assert all("enqueued_ms" in e for e in ready)
    assert not any("enqueued_ms" in e or "fanout_collect" in e for e in pending)
    status = stream.status()
    assert (status.total, status.running, status.open, status.done) == (5, 2, True, False)


def test_a_large_add_is_chunked_with_consecutive_positions(r: redis.Redis) -> None:
    stream = open_fanout(r, "resize", limit=3, keys=KEYS)
    ids = stream.add([[i] for i in range(2500)])
    envs = _envelopes(r, KEYS.queue("resize")) + _envelopes(r, KEYS.fanout_pending(stream.id))
    assert [e["id"] for e in envs] == ids
    assert [e["fanout_seq"] for e in envs] == list(range(2500))
    assert r.llen(KEYS.queue("resize")) == 3 and stream.status().total == 2500


def test_an_open_fan_out_is_not_done_even_with_nothing_outstanding(r: redis.Redis) -> None:
    stream = open_fanout(r, "resize", limit=3, keys=KEYS)
    with pytest.raises(FanoutTimeout):
        stream.wait(timeout=0.3)
    assert stream.result() is None
    assert stream.close() is True  # nothing was added: done at close
    assert stream.wait(timeout=5).total == 0


def test_add_after_close_and_to_an_unknown_fan_out_are_refused(r: redis.Redis) -> None:
    with open_fanout(r, "resize", limit=1, keys=KEYS) as stream:
        stream.add([[1]])
    with pytest.raises(FanoutClosed):
        stream.add([[2]])
    assert stream.close() is False  # closing twice is harmless; [1] has not run
    assert r.llen(KEYS.queue("resize")) == 1
    ghost = FanoutStream.attach(r, "0" * 32, keys=KEYS)
    with pytest.raises(UnknownFanout):
        ghost.add([[1]])
    with pytest.raises(UnknownFanout):
        ghost.close()


def test_an_open_stream_expires_after_its_ttl_but_a_closed_one_is_kept_until_done(
    r: redis.Redis,
) -> None:
    stream = open_fanout(r, "resize", limit=1, ttl=30, keys=KEYS)
    stream.add([[1], [2]])
    assert 0 < r.ttl(KEYS.fanout(stream.id)) <= 30
    assert 0 < r.ttl(KEYS.fanout_pending(stream.id)) <= 30
    stream.close()
    assert r.ttl(KEYS.fanout(stream.id)) == -1
    assert r.ttl(KEYS.fanout_pending(stream.id)) == -1


def test_status_counts_the_open_streams_until_closed_or_expired(r: redis.Redis) -> None:
    from taskscale.status import collect, render

    closing = open_fanout(r, "resize", limit=1, keys=KEYS)
    open_fanout(r, "resize", limit=1, keys=KEYS).add([[1]])
    short = open_fanout(r, "resize", limit=1, ttl=1, keys=KEYS)
    status = collect(r, KEYS)
    assert status["open_fanouts"] == 3
    assert "open streamed fan-outs: 3" in render(status).splitlines()
    closing.close()
    assert collect(r, KEYS)["open_fanouts"] == 2
    wait_until(lambda: not r.exists(KEYS.fanout(short.id)), timeout=10)
    assert collect(r, KEYS)["open_fanouts"] == 1  # an abandoned stream stops counting
    open_fanout(r, "resize", limit=1, keys=KEYS)  # and is pruned from the index
    assert short.id.encode() not in r.zrange(KEYS.fanouts_open, 0, -1)
    assert r.zcard(KEYS.fanouts_open) == 2


def test_an_add_moves_an_open_streams_expiry_in_the_index_with_its_keys(r: redis.Redis) -> None:
    stream = open_fanout(r, "resize", limit=1, ttl=600, keys=KEYS)
    r.zadd(KEYS.fanouts_open, {stream.id: 1})  # as if about to expire
    stream.add([[1]])
    seconds, micros = r.time()
    expiry = r.zscore(KEYS.fanouts_open, stream.id)
    assert expiry is not None
    assert abs(expiry - (seconds * 1000 + micros // 1000 + 600_000)) < 5000


def test_a_final_outcome_while_open_does_not_finish_the_stream_but_keeps_it_alive(
    r: redis.Redis,
) -> None:
    from taskscale.cancellation import cancel

    stream = open_fanout(r, "resize", limit=1, ttl=600, keys=KEYS)
    [only] = stream.add([[1]])
    r.zadd(KEYS.fanouts_open, {stream.id: 1})  # as if about to expire
    r.expire(KEYS.fanout(stream.id), 5)
    assert cancel(only, client=r, keys=KEYS).removed  # its final outcome: failed
    status = stream.status()
    assert (status.total, status.failed, status.done) == (1, 1, False)
    assert not r.exists(KEYS.fanout_done(stream.id))  # open: no notice yet
    assert r.ttl(KEYS.fanout(stream.id)) > 500  # the outcome renewed the open stream
    expiry = r.zscore(KEYS.fanouts_open, stream.id)
    assert expiry is not None and expiry > 1_000_000
    assert stream.close() is True  # closed after its last outcome: done at close
    assert (stream.wait(timeout=5).total, stream.wait(timeout=5).failed) == (1, 1)
    assert r.zscore(KEYS.fanouts_open, stream.id) is None


def test_sub_task_options_are_written_into_the_envelopes(r: redis.Redis) -> None:
    settings = StreamSettings(options=TaskOptions(max_retries=0, timeout=5))
    stream = open_fanout(r, "resize", limit=1, collect=True, settings=settings, keys=KEYS)
    stream.add([[1]])
    [env] = _envelopes(r, KEYS.queue("resize"))
    assert (env["max_retries"], env["timeout_ms"], env["fanout_collect"]) == (0, 5000, True)


# --- real workers -------------------------------------------------------------


@pytest.mark.slow
def test_three_adds_run_while_open_complete_only_after_close_with_results_in_order(
    redis_url: str,
    r: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tag = "stream"
    workers = [
        start_worker(redis_url, types="fo.square", imports=TASKS, threads=3) for _ in range(2)
    ]
    with processes(*workers):
        wait_until(lambda: r.zcard(KEYS.workers) == 2)
        settings = StreamSettings(options=TaskOptions(max_retries=0))
        stream = open_fanout(r, "fo.square", limit=2, collect=True, settings=settings, keys=KEYS)

        def batch(numbers: range) -> list[dict[str, object]]:
            return [{"i": i, "tag": tag, "fail": i == 7} for i in numbers]

        stream.add(batch(range(0, 4)))
        # Earlier sub-tasks run while the fan-out is still open.
        wait_until(lambda: _finished(r, tag) >= 2)
        stream.add(batch(range(4, 8)))
        stream.add(batch(range(8, 12)))
        wait_until(lambda: _finished(r, tag) == 12)
        wait_until(lambda: stream.status().succeeded + stream.status().failed == 12)
        # Every sub-task has its outcome, but the fan-out is not closed: not done.
        assert stream.result() is None and not stream.status().done
        with pytest.raises(FanoutTimeout):
            stream.wait(timeout=0.5)
        assert stream.close() is True
        result = stream.wait(timeout=10, collect=True)

    assert (result.total, result.succeeded, result.failed) == (12, 11, 1)
    assert result.results is not None
    assert [s.index for s in result.results] == list(range(12))
    assert [s.result for s in result.results if s.ok] == [i * i for i in range(12) if i != 7]
    failed = result.results[7]
    assert (failed.ok, failed.error_type) == (False, "ValueError")
    assert "sub-task 7 was told to fail" in failed.error
    max_seen = int(r.zscore(MAX_SEEN.format(tag=tag), "max") or 0)
    assert 1 <= max_seen <= 2, f"{max_seen} sub-tasks ran at once with limit 2"
    assert r.get(RUNNING.format(tag=tag)) == b"0"
    assert r.hget(KEYS.fanout(stream.id), "running") == b"0"
    # Any other process sees the same notice (and results) by id.
    assert FanoutHandle.attach(r, stream.id, keys=KEYS).wait(timeout=1).total == 12
    monkeypatch.setenv("TASKSCALE_REDIS_URL", redis_url)
    monkeypatch.setenv("TASKSCALE_NAMESPACE", KEYS.namespace)
    assert main(["fanout", stream.id, "--results"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "done; 12 sub-tasks, 11 succeeded, 1 failed" in lines[0]
    assert lines[3] == "  1: ok 1" and lines[9].startswith("  7: error ValueError: sub-task 7")
    assert main(["fanout", "0" * 32]) == 3


@pytest.mark.slow
def test_results_past_the_size_limit_are_dropped_markers_and_results_expire(
    redis_url: str, r: redis.Redis
) -> None:
    tag = "collect"
    pad = 200  # each result is ~260 bytes of JSON: the limit keeps two
    worker = start_worker(redis_url, types="fo.square", imports=TASKS, threads=2)
    with processes(worker):
        stream = open_fanout(
            r,
            "fo.square",
            limit=1,  # one at a time: the first two in order fill the limit
            collect=True,
            max_result_bytes=600,
            result_ttl=2,
            keys=KEYS,
        )
        with stream:
            stream.add([{"i": i, "tag": tag, "sleep_s": 0.0, "pad": pad} for i in range(5)])
        result = stream.wait(timeout=60, collect=True)

    assert result.results is not None
    kept = [s for s in result.results if not s.dropped]
    assert [s.index for s in kept] == [0, 1]
    assert [s.unwrap()[0] for s in kept] == [0, 1]
    dropped = result.results[2:]
    assert all(s.dropped and s.ok for s in dropped)
    with pytest.raises(LookupError):
        dropped[0].unwrap()
    state = r.hgetall(KEYS.fanout(stream.id))
    assert int(state[b"results_dropped"]) == 3
    assert int(state[b"collected_bytes"]) <= 600
    # The results' TTL (2 s), not the state's (a day), bounds how long they are kept.
    assert 0 < r.pttl(KEYS.fanout_results(stream.id)) <= 2000
    assert r.ttl(KEYS.fanout(stream.id)) > 3600
    wait_until(lambda: not r.exists(KEYS.fanout_results(stream.id)), timeout=10)
    with pytest.raises(ResultsExpired):
        stream.wait(timeout=1, collect=True)
    assert stream.wait(timeout=1).succeeded == 5  # the notice itself is still there


@pytest.mark.slow
def test_closing_before_the_last_outcome_completes_on_that_outcome(
    redis_url: str, r: redis.Redis
) -> None:
    worker = start_worker(redis_url, types="fo.square", imports=TASKS, threads=2)
    with processes(worker):
        stream = open_fanout(r, "fo.square", limit=2, keys=KEYS)
        stream.add([{"i": i, "tag": "close-first", "sleep_s": 0.3} for i in range(4)])
        started = time.monotonic()
        assert stream.close() is False
        result = stream.wait(timeout=60)
    assert (result.total, result.succeeded) == (4, 4)
    assert time.monotonic() - started > 0.3  # it waited for the sub-tasks
    with pytest.raises(ValueError, match="without collect"):
        stream.wait(timeout=1, collect=True)


@pytest.mark.slow
def test_a_streamed_sub_task_of_a_killed_worker_keeps_its_slot_and_its_result_is_kept_once(
    redis_url: str, r: redis.Redis
) -> None:
    tag = "stream-kill"
    doomed = start_worker(
        redis_url,
        types="fo.track",
        imports=TASKS,
        threads=1,
        lease=2.0,
        heartbeat=0.5,
        env={HANG_ENV: "1"},
    )
    with processes(doomed) as started:
        stream = open_fanout(r, "fo.track", limit=1, collect=True, keys=KEYS)
        stream.add([{"i": 0, "tag": tag}])
        wait_until(lambda: r.hget(STARTS.format(tag=tag), "0"))
        kill(doomed)
        stream.add([{"i": i, "tag": tag} for i in (1, 2)])  # the slot is still taken
        assert r.llen(KEYS.fanout_pending(stream.id)) == 2
        stream.close()
        started.append(start_scheduler(redis_url, lease=2.0))
        started.append(start_worker(redis_url, types="fo.track", imports=TASKS))
        result = stream.wait(timeout=120, collect=True)

    assert result.results is not None
    assert [(s.index, s.result) for s in result.results] == [(0, 0), (1, 1), (2, 2)]
    assert r.hget(STARTS.format(tag=tag), "0") == b"2"  # the killed run, then the rerun
    assert r.hget(KEYS.fanout(stream.id), "running") == b"0"
