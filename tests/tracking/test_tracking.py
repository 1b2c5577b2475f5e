"""taskscale.tracking keeps ACTIVE_TASKS / IDLE_SINCE for code that is not our
worker with our scripts' rules: atomic, never negative, Redis clock, and a
lease so a dead process's tasks are counted down by a live one."""

from __future__ import annotations

import time

import pytest
import redis

from support.counters import active, stat
from support.waiting import wait_until
from taskscale.keys import Keys
from taskscale.luascripts import script_source
from taskscale.tracking import Tracker, set_default_tracker, track, tracked

pytestmark = pytest.mark.integration


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


def test_start_and_stop_count_and_stamp_idle_since_on_the_redis_clock(
    r: redis.Redis, keys: Keys
) -> None:
    tracker = Tracker(r, keys, heartbeat_s=600)
    first = tracker.start("resize")
    tracker.start("resize")
    assert active(r, keys, "resize") == 2
    assert r.hget(keys.idle_since, "resize") is None
    before = r.time()
    tracker.stop(first)
    after = r.time()
    assert active(r, keys, "resize") == 1
    idle = float(r.hget(keys.idle_since, "resize") or 0)
    assert before[0] + before[1] / 1e6 - 0.001 <= idle <= after[0] + after[1] / 1e6
    assert stat(r, keys, "resize", "claimed") == 2
    assert stat(r, keys, "resize", "completed") == 1
    tracker.close()
    assert active(r, keys, "resize") == 0


def test_a_repeated_stop_counts_nothing(r: redis.Redis, keys: Keys) -> None:
    tracker = Tracker(r, keys, heartbeat_s=600)
    task_id = tracker.start("resize")
    tracker.start("resize")
    tracker.stop(task_id)
    tracker.stop(task_id)  # ignored locally
    # ... and by the script, when a second process replays the same stop.
    script = r.register_script(script_source("track_stop"))
    inflight = keys.tracked_inflight(tracker.process_id)
    skeys = [keys.active, keys.idle_since, inflight, keys.stats("resize")]
    assert script(keys=skeys, args=[task_id, "resize", "completed", 5]) == 0
    assert active(r, keys, "resize") == 1
    assert stat(r, keys, "resize", "active_underflow") == 0
    tracker.close()


def test_the_plain_protocol_never_goes_negative(r: redis.Redis, keys: Keys) -> None:
    stop = r.register_script(script_source("track_stop"))
    skeys = [keys.active, keys.idle_since, keys.tracked_inflight("x"), keys.stats("mail")]
    r.hincrby(keys.active, "mail", 1)  # the plain start_task is one HINCRBY
    assert stop(keys=skeys, args=["", "mail", "completed", 1]) == 1
    assert stop(keys=skeys, args=["", "mail", "completed", 1]) == 1
    assert active(r, keys, "mail") == 0
    assert stat(r, keys, "mail", "active_underflow") == 1
    assert r.hget(keys.idle_since, "mail") is not None


def test_a_dead_process_is_counted_down_by_a_live_peer(r: redis.Redis, keys: Keys) -> None:
    # The "dead" tracker never heartbeats (as if killed): its lease runs out.
    dead = Tracker(r, keys, lease_s=0.3, heartbeat_s=600)
    dead.start("render")
    dead.start("render")
    alive = Tracker(r, keys, lease_s=30, heartbeat_s=600)
    alive.start("render")
    assert alive.heartbeat().reaped == 0  # the lease is still good
    assert active(r, keys, "render") == 3
    wait_until(lambda: alive.heartbeat().reaped == 1, timeout=5)
    assert active(r, keys, "render") == 1
    assert not r.exists(keys.tracked_inflight(dead.process_id))
    assert r.zscore(keys.tracked_processes, dead.process_id) is None
    alive.close()
    assert active(r, keys, "render") == 0


def test_the_heartbeat_heals_a_lost_start_and_a_lost_stop(
    r: redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = Tracker(r, keys, heartbeat_s=600)
    kept = tracker.start("index")
    r.delete(keys.tracked_inflight(tracker.process_id))  # the start "never arrived"
    r.hset(keys.active, "index", 0)
    assert tracker.heartbeat().counted_up == 1
    assert active(r, keys, "index") == 1

    def lost(**_: object) -> None:
        raise redis.ConnectionError("connection lost")

    monkeypatch.setattr(tracker, "_stop", lost)
    tracker.stop(kept)  # logged, not raised: tracking never breaks the task
    assert active(r, keys, "index") == 1
    assert tracker.heartbeat().counted_down == 1
    assert active(r, keys, "index") == 0
    tracker.close()


def test_the_heartbeat_thread_keeps_the_lease_alive(r: redis.Redis, keys: Keys) -> None:
    tracker = Tracker(r, keys, lease_s=0.6, heartbeat_s=0.1)
    tracker.start("render")
    peer = Tracker(r, keys, heartbeat_s=600)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert peer.heartbeat().reaped == 0
        time.sleep(0.1)
    assert active(r, keys, "render") == 1
    tracker.close()
    peer.close()


def test_track_is_a_context_manager_and_a_decorator(r: redis.Redis, keys: Keys) -> None:
    tracker = Tracker(r, keys, heartbeat_s=600)
    set_default_tracker(tracker)
    try:
        with track("thumb"):
            assert active(r, keys, "thumb") == 1

        @track("thumb")
        def boom() -> None:
            assert active(r, keys, "thumb") == 1
            raise ValueError("boom")

        @tracked("thumb")
        def nested() -> int:
            with track("thumb"):
                return active(r, keys, "thumb")

        with pytest.raises(ValueError):
            boom()
        assert nested() == 2
        assert active(r, keys, "thumb") == 0
        assert stat(r, keys, "thumb", "failed") == 1
        assert stat(r, keys, "thumb", "completed") == 3
    finally:
        set_default_tracker(None)
        tracker.close()


def test_open_reaps_at_once_and_keeps_an_idle_process_reaping(r: redis.Redis, keys: Keys) -> None:
    dead = Tracker(r, keys, lease_s=0.3, heartbeat_s=600)
    dead.start("render")
    time.sleep(0.5)  # the lease ran out; nobody has reaped yet
    assert active(r, keys, "render") == 1
    idle = Tracker(r, keys, lease_s=0.6, heartbeat_s=0.1)
    idle.open()  # no task of its own
    assert active(r, keys, "render") == 0
    again = Tracker(r, keys, lease_s=0.3, heartbeat_s=600)
    again.start("render")
    # the idle process's heartbeat thread reaps this one too, unprompted
    wait_until(lambda: active(r, keys, "render") == 0, timeout=10)
    assert r.zscore(keys.tracked_processes, idle.process_id) is not None
    idle.close()
    assert r.zscore(keys.tracked_processes, idle.process_id) is None


def test_a_process_records_its_pod_with_its_lease_and_drops_it_when_it_goes(
    r: redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "mail-worker-2")
    tracker = Tracker(r, keys, heartbeat_s=600)
    assert tracker.pod == "mail-worker-2"  # POD_NAME, as a taskscale worker reads it
    tracker.start("send")
    assert r.hget(keys.tracked_pods, tracker.process_id) == b"mail-worker-2"
    r.hdel(keys.tracked_pods, tracker.process_id)  # lost (reaped while alive, say)
    tracker.heartbeat()
    assert r.hget(keys.tracked_pods, tracker.process_id) == b"mail-worker-2"
    tracker.close()
    assert r.hget(keys.tracked_pods, tracker.process_id) is None

    dead = Tracker(r, keys, lease_s=0.3, heartbeat_s=600, pod="mail-worker-0")
    dead.start("send")
    peer = Tracker(r, keys, heartbeat_s=600)
    wait_until(lambda: peer.heartbeat().reaped == 1, timeout=5)
    assert r.hget(keys.tracked_pods, dead.process_id) is None  # reaped with its lease
    peer.close()


def test_a_caller_of_the_layout_without_a_pod_still_syncs(r: redis.Redis, keys: Keys) -> None:
    # track_sync with three keys: the task pairs start at ARGV[5], as before pods
    sync = r.register_script(script_source("track_sync"))
    reply = sync(
        keys=[keys.active, keys.idle_since, keys.tracked_processes],
        args=[keys.prefix, "other-lang-1", 30_000, 100, "job-1", "resize"],
    )
    assert [int(v) for v in reply] == [1, 0, 0]
    assert r.hgetall(keys.tracked_inflight("other-lang-1")) == {b"job-1": b"resize"}
    assert active(r, keys, "resize") == 1
    assert not r.exists(keys.tracked_pods)
    sync(
        keys=[keys.active, keys.idle_since, keys.tracked_processes],
        args=[keys.prefix, "other-lang-1", 0, 100],
    )
    assert active(r, keys, "resize") == 0
