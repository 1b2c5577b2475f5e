"""Observer sources: a TaskScaler reads the queues of Celery, RQ and plain
Redis lists, written by the real libraries, summed per type with the in-flight
counts of ACTIVE_TASKS -- one read-only round trip, missing keys read as empty."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import source_apps
from kombu import Connection, Consumer, Exchange, Queue
from rq import Queue as RqQueue

from support.controller import enqueue
from support.waiting import wait_until
from support.workers import process_env
from taskscale.controller.observer import ObserveRequest
from taskscale.controller.sharded import observer_for
from taskscale.controller.source_spec import TypeSource
from taskscale.controller.types import TypeObservation, busy_by_pod
from taskscale.keys import CELERY_PRIORITY_SEPARATOR, Keys, rq_queue, rq_started
from taskscale.tracking import Tracker

pytestmark = pytest.mark.integration


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


@pytest.fixture
def celery_app(redis_url: str) -> Iterator[Any]:
    app = source_apps.make_app(redis_url)
    yield app
    app.close()


def observe(redis_url: str, keys: Keys, *sources: TypeSource, lead_s: float = 30) -> Any:
    client = redis.Redis.from_url(redis_url)
    try:
        observer = observer_for(client, keys.namespace)
        request = ObserveRequest(
            types=tuple(s.task_type for s in sources), lead_s=lead_s, sources=sources
        )
        return observer.observe({"s": request})["s"]
    finally:
        client.close()


def one(redis_url: str, keys: Keys, source: TypeSource, lead_s: float = 30) -> TypeObservation:
    obs: TypeObservation = observe(redis_url, keys, source, lead_s=lead_s).types[source.task_type]
    return obs


def test_celery_queued_counts_every_priority_list_of_every_queue(
    celery_app: Any, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    for priority in (0, 0, 3, 5, 9):
        celery_app.send_task(source_apps.QUICK_TASK, queue="mail", priority=priority)
    celery_app.send_task(source_apps.QUICK_TASK, queue="mail-bulk", priority=7)
    celery_app.send_task(source_apps.QUICK_TASK, queue="other")
    # kombu put the prioritised messages in lists of their own
    assert r.llen("mail") == 2
    assert r.llen(f"mail{CELERY_PRIORITY_SEPARATOR}3") == 1
    assert r.llen(f"mail{CELERY_PRIORITY_SEPARATOR}9") == 1

    mail = one(redis_url, keys, TypeSource("mail", "celery", ("mail", "mail-bulk"), ("mail",)))

    assert (mail.queued, mail.active, mail.due, mail.upcoming) == (6, 0, 0, 0)
    assert mail.idle_since is None


def test_celery_unacked_messages_of_its_queues_count_as_in_flight(
    celery_app: Any, redis_url: str, keys: Keys
) -> None:
    celery_app.send_task(source_apps.QUICK_TASK, queue="mail")
    celery_app.send_task(source_apps.QUICK_TASK, queue="mail", countdown=3600)  # an ETA task
    celery_app.send_task(source_apps.QUICK_TASK, queue="other")
    taken = take_without_ack(redis_url, "mail", 2) + take_without_ack(redis_url, "other", 1)
    assert taken == 3
    source = TypeSource("mail", "celery", ("mail",), ("mail",))

    mail = one(redis_url, keys, source)

    # a worker holds both (the ETA one until its time): in flight, not queued
    assert (mail.queued, mail.active) == (0, 2)


def take_without_ack(redis_url: str, queue: str, count: int) -> int:
    """Fetch ``count`` messages with kombu's Redis transport, as a Celery worker's
    consumer does, and leave them unacknowledged (kombu records them in ``unacked``)."""
    got: list[Any] = []
    with Connection(redis_url) as conn:
        q = Queue(queue, Exchange(queue), routing_key=queue)
        with Consumer(conn, [q], callbacks=[lambda body, msg: got.append(msg)], prefetch_count=0):
            deadline = time.monotonic() + 10
            while len(got) < count and time.monotonic() < deadline:
                try:
                    conn.drain_events(timeout=1)
                except TimeoutError:
                    continue
        # leaving without ack (or reject): the messages stay in kombu's unacked hash
        conn.default_channel.qos._delivered.clear()
    return len(got)


def test_celery_in_flight_is_the_larger_of_active_tasks_and_unacked(
    celery_app: Any, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    celery_app.send_task(source_apps.QUICK_TASK, queue="mail")
    assert take_without_ack(redis_url, "mail", 1) == 1
    tracker = Tracker(r, keys)
    try:
        for _ in range(3):
            tracker.start(source_apps.QUICK_TASK)
        source = TypeSource("mail", "celery", ("mail",), (source_apps.QUICK_TASK,))
        # an acks_late task is both unacked and counted: once, not twice
        assert one(redis_url, keys, source).active == 3
    finally:
        tracker.close()


@pytest.mark.slow
def test_rq_reads_queue_started_registry_and_scheduled_registry(
    r: redis.Redis, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    q = RqQueue("reports", connection=r)
    q.enqueue("source_apps.rq_block", "release-1")
    q.enqueue("source_apps.quick")
    q.enqueue_in(timedelta(seconds=10), "source_apps.quick")  # within the 30 s lead
    q.enqueue_in(timedelta(hours=2), "source_apps.quick")  # beyond it
    q.enqueue_at(datetime.now(UTC) - timedelta(seconds=5), "source_apps.quick")  # due
    tasks = ("source_apps.rq_block", "source_apps.quick")
    source = TypeSource("reports", "rq", ("reports",), tasks)

    before = one(redis_url, keys, source)
    assert (before.queued, before.upcoming, before.active) == (3, 1, 0)

    with rq_worker(redis_url, "reports", tmp_path, keys):
        wait_until(lambda: r.zcard(rq_started("reports")) == 1, what="a started job")
        # the RQ integration counts the same job in ACTIVE_TASKS
        wait_until(lambda: r.hget(keys.active, tasks[0]) == b"1", what="the job tracked")
        during = one(redis_url, keys, source)
        # the blocking job runs (counted once, not by both the registry and ACTIVE_TASKS);
        # the quick job and the due one wait for this one-job worker (queued, whether or
        # not its scheduler has moved the due one yet); due in 10 s is upcoming, in 2 h not
        assert (during.queued, during.active, during.upcoming) == (2, 1, 1)
        r.rpush("release-1", 1)
        wait_until(lambda: r.llen(rq_queue("reports")) == 0, what="the queue drained")
        wait_until(lambda: r.hget(keys.active, tasks[0]) == b"0", what="the job finished")
        after = wait_until(
            lambda: (o := one(redis_url, keys, source)).active == 0 and o, what="all done"
        )
    assert after.queued == 0 and after.idle_since is not None


@contextlib.contextmanager
def rq_worker(
    redis_url: str, queue: str, tmp_path: Path, keys: Keys
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``rq worker --with-scheduler`` with the taskscale integration on
    ``queue``, stopped on exit."""
    env = process_env(
        redis_url, {"SOURCES_REDIS_URL": redis_url, "TASKSCALE_NAMESPACE": keys.namespace}
    )
    command = [sys.executable, "-m", "rq.cli", "worker", "--with-scheduler"]
    command += ["-w", "taskscale.integrations.rq.TrackingSimpleWorker", "--url", redis_url, queue]
    with open(tmp_path / "rq.log", "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_list_source_sums_lists_active_tasks_and_stats(
    r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    r.rpush("jobs:email", "a", "b")
    r.rpush("jobs:email-retry", "c")
    tracker = Tracker(r, keys)
    try:
        tracker.start("send_email")
        done = tracker.start("bounce")
        tracker.stop(done)
        source = TypeSource(
            "email", "list", ("jobs:email", "jobs:email-retry"), ("send_email", "bounce")
        )

        email = one(redis_url, keys, source)

        assert (email.queued, email.active) == (3, 1)
        # the rate floor's counters, summed over the task names
        assert (email.claimed_total, email.completed_total, email.failed_total) == (2, 1, 0)
        seconds, micros = r.time()
        assert email.idle_since is not None
        assert 0 <= seconds + micros / 1e6 - email.idle_since < 30
    finally:
        tracker.close()


def test_missing_keys_read_as_empty_and_idle(r: redis.Redis, redis_url: str, keys: Keys) -> None:
    sources = (
        TypeSource("a", "celery", ("nothing",), ("nothing",)),
        TypeSource("b", "rq", ("nothing",), ("nothing",)),
        TypeSource("c", "list", ("nothing",), ("nothing",)),
    )
    obs = observe(redis_url, keys, *sources)
    for t in "abc":
        assert obs.types[t] == TypeObservation(task_type=t)
    assert r.dbsize() == 0  # nothing created


def test_a_scaler_mixing_sources_sees_every_type_in_one_observation(
    celery_app: Any, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    enqueue(r, keys, "native", 2)
    celery_app.send_task(source_apps.QUICK_TASK, queue="mail")
    client = redis.Redis.from_url(redis_url)
    try:
        source = TypeSource("mail", "celery", ("mail",), ("mail",))
        request = ObserveRequest(types=("native", "mail"), lead_s=0, sources=(source,))
        obs = observer_for(client, keys.namespace).observe({"s": request})["s"]
    finally:
        client.close()
    assert obs.types["native"].queued == 2
    assert obs.types["mail"].queued == 1
    assert obs.schedulers_alive == 0  # observe.lua still read the registry


def test_every_source_type_of_every_scaler_is_read_in_one_read_only_call(
    celery_app: Any, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    from support.controller import CountingConnection, evalsha_calls

    celery_app.send_task(source_apps.QUICK_TASK, queue="mail", priority=9)
    RqQueue("reports", connection=r).enqueue("source_apps.quick")
    r.rpush("jobs", "x")
    requests = {
        "a": ObserveRequest(
            types=("mail", "reports"),
            lead_s=30,
            sources=(
                TypeSource("mail", "celery", ("mail",), ("mail",)),
                TypeSource("reports", "rq", ("reports",), ("reports",)),
            ),
        ),
        "b": ObserveRequest(
            types=("jobs",), lead_s=0, sources=(TypeSource("jobs", "list", ("jobs",), ("j",)),)
        ),
    }
    pool = redis.ConnectionPool.from_url(redis_url, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool)
    try:
        observer = observer_for(client, keys.namespace)
        observer.observe(requests)  # the first call may load the script
        calls_before = evalsha_calls(r)
        CountingConnection.sends = 0
        before = snapshot(r)

        obs = observer.observe(requests)

        assert CountingConnection.sends == 1
        assert evalsha_calls(r) - calls_before == 1
        assert [obs["a"].types[t].queued for t in ("mail", "reports")] == [1, 1]
        assert obs["b"].types["jobs"].queued == 1
        assert snapshot(r) == before  # read-only
    finally:
        client.close()


def snapshot(r: redis.Redis) -> dict[bytes, bytes | None]:
    """Every key with its serialized value (DUMP)."""
    return {key: r.dump(key) for key in r.scan_iter()}  # type: ignore[misc]


def test_a_large_unacked_hash_is_sampled_and_scaled_to_its_size(
    celery_app: Any, redis_url: str, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskscale.controller import sources

    for queue, count in (("mail", 16), ("other", 8)):
        for _ in range(count):
            celery_app.send_task(source_apps.QUICK_TASK, queue=queue)
        assert take_without_ack(redis_url, queue, count) == count
    monkeypatch.setattr(sources, "UNACKED_SAMPLE", 8)  # 24 entries: read 8, each counts 3
    mail = TypeSource("mail", "celery", ("mail",), ("mail",))
    other = TypeSource("other", "celery", ("other",), ("other",))

    obs = observe(redis_url, keys, mail, other)

    estimates = [obs.types[t].active for t in ("mail", "other")]
    assert sum(estimates) == 24  # the sample's shares of the whole hash
    assert all(e % 3 == 0 for e in estimates)
    monkeypatch.setattr(sources, "UNACKED_SAMPLE", 24)  # read whole: exact
    assert [observe(redis_url, keys, mail, other).types[t].active for t in ("mail", "other")] == [
        16,
        8,
    ]


def test_tracked_processes_running_a_scalers_tasks_are_its_busy_workers_by_pod(
    r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    busy = Tracker(r, keys, heartbeat_s=600, pod="mail-worker-1")
    busy_too = Tracker(r, keys, heartbeat_s=600, pod="mail-worker-1")  # a prefork sibling
    idle = Tracker(r, keys, heartbeat_s=600, pod="mail-worker-2")
    other = Tracker(r, keys, heartbeat_s=600, pod="report-worker-1")
    gone = Tracker(r, keys, lease_s=0.2, heartbeat_s=600, pod="mail-worker-3")
    try:
        busy.start("send_email")
        busy.start("render")  # not the scaler's, but the pod is busy with it too
        busy_too.start("bounce")
        idle.open()
        other.start("report")
        gone.start("send_email")
        time.sleep(0.3)  # gone's lease runs out (nobody reaps it yet)
        source = TypeSource("email", "list", ("jobs:email",), ("send_email", "bounce"))

        obs = observe(redis_url, keys, source)

        workers = sorted(obs.workers, key=lambda w: w.worker_id != busy.process_id)
        assert [(w.pod, w.types, w.threads, w.busy) for w in workers] == [
            ("mail-worker-1", ("email",), 0, 2),
            ("mail-worker-1", ("email",), 0, 1),
        ]
        assert busy_by_pod(obs.workers) == {"mail-worker-1": 3}
        assert obs.types["email"].active == 3  # send_email x 2 (gone's not reaped yet) + bounce
    finally:
        for tracker in (busy, busy_too, idle, other, gone):
            tracker.close()
