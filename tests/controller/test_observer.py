"""The observer reads exactly what docs/schema.md says, in one round trip, on
the Redis clock; the demand listener wakes on the enqueue script's signal."""

from __future__ import annotations

import json
import queue
import threading
import time

import pytest
import redis

from support.controller import CountingConnection, evalsha_calls, push_ready
from support.redis_server import RedisServer
from taskscale.controller.observer import (
    DemandListener,
    ListenerSettings,
    Observer,
    ObserveRequest,
)
from taskscale.controller.types import busy_by_pod
from taskscale.keys import DEFAULT_PRIORITY, Keys
from taskscale.producer import Call, Producer

pytestmark = pytest.mark.integration


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


def redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def envelope(task_type: str, n: int) -> str:
    return json.dumps({"id": f"{task_type}-{n}", "type": task_type, "args": []})


def register_worker(
    r: redis.Redis,
    keys: Keys,
    worker_id: str,
    *,
    pod: str,
    types: str,
    busy: int,
    lease_ms: int = 30_000,
    threads: int = 4,
) -> None:
    r.zadd(keys.workers, {worker_id: redis_ms(r) + lease_ms})
    r.hset(
        keys.worker(worker_id),
        mapping={"id": worker_id, "pod": pod, "types": types, "threads": threads, "busy": busy},
    )


def test_queued_sums_every_priority_level(r: redis.Redis, keys: Keys) -> None:
    push_ready(r, keys, "email", 0, envelope("email", 1))
    push_ready(r, keys, "email", 5, envelope("email", 2), envelope("email", 3))
    push_ready(r, keys, "email", 9, envelope("email", 4))
    push_ready(r, keys, "other", 5, envelope("other", 1))

    obs = Observer(r, keys).observe({"s": ObserveRequest(types=("email",), lead_s=30)})

    assert obs["s"].types["email"].queued == 4
    assert set(obs["s"].types) == {"email"}


def test_due_and_upcoming_split_the_delayed_set_on_the_redis_clock(
    r: redis.Redis, keys: Keys
) -> None:
    now = redis_ms(r)
    r.zadd(
        keys.delayed("report"),
        {
            envelope("report", 1): now - 5_000,  # due
            envelope("report", 2): now - 1,  # due
            envelope("report", 3): now + 10_000,  # within a 30 s lead
            envelope("report", 4): now + 100_000,  # beyond it
        },
    )

    obs = Observer(r, keys).observe({"s": ObserveRequest(types=("report",), lead_s=30)})

    t = obs["s"].types["report"]
    assert (t.due, t.upcoming, t.queued) == (2, 1, 0)
    assert abs(obs["s"].at * 1000 - now) < 60_000  # Redis time, not epoch 0 or ms
    assert 5.0 <= t.oldest_due_s < 65.0  # the oldest due task's age, on the Redis clock


def test_oldest_due_is_none_while_nothing_delayed_is_due(r: redis.Redis, keys: Keys) -> None:
    r.zadd(keys.delayed("report"), {envelope("report", 1): redis_ms(r) + 60_000})
    obs = Observer(r, keys).observe({"s": ObserveRequest(types=("report",), lead_s=0)})
    assert obs["s"].types["report"].oldest_due_s is None


def test_active_idle_since_and_counters_come_from_the_schema_hashes(
    r: redis.Redis, keys: Keys
) -> None:
    r.hset(keys.active, "email", 3)
    r.hset(keys.idle_since, "email", "1763750000.123")
    r.hset(
        keys.stats("email"),
        mapping={
            "enqueued": 10,
            "claimed": 9,
            "completed": 7,
            "failed": 1,
            "service_ms": 7000,
            "wait_ms": 450,
            "retried": 1,
            "dead": 2,
            "cancelled": 4,
            "unique_hits": 5,
            "dead_dropped": 6,
        },
    )

    t = Observer(r, keys).observe({"s": ObserveRequest(("email",), 0)})["s"].types["email"]

    assert t.active == 3
    assert t.idle_since == pytest.approx(1763750000.123)
    assert (t.enqueued_total, t.claimed_total, t.completed_total, t.failed_total) == (10, 9, 7, 1)
    assert (t.service_ms_total, t.wait_ms_total, t.dead_total) == (7000, 450, 2)
    assert (t.cancelled_total, t.unique_hits_total, t.dead_dropped_total) == (4, 5, 6)


def test_a_type_never_seen_reads_as_empty_and_never_completed(r: redis.Redis, keys: Keys) -> None:
    t = Observer(r, keys).observe({"s": ObserveRequest(("ghost",), 30)})["s"].types["ghost"]

    assert (t.queued, t.due, t.upcoming, t.active, t.enqueued_total) == (0, 0, 0, 0, 0)
    assert t.idle_since is None


def test_workers_are_live_registry_records_serving_the_scalers_types(
    r: redis.Redis, keys: Keys
) -> None:
    register_worker(r, keys, "w-busy", pod="pod-a", types="email,sms", busy=2)
    register_worker(r, keys, "w-idle", pod="pod-b", types="email", busy=0)
    register_worker(r, keys, "w-other", pod="pod-c", types="video", busy=1)
    register_worker(r, keys, "w-expired", pod="pod-d", types="email", busy=4, lease_ms=-1000)
    r.zadd(keys.workers, {"w-no-record": redis_ms(r) + 30_000})

    obs = Observer(r, keys).observe(
        {
            "mail": ObserveRequest(("email",), 30),
            "video": ObserveRequest(("video",), 30),
        }
    )

    mail = {w.worker_id: w for w in obs["mail"].workers}
    assert set(mail) == {"w-busy", "w-idle"}
    assert mail["w-busy"].pod == "pod-a"
    assert mail["w-busy"].types == ("email", "sms")
    assert (mail["w-busy"].busy, mail["w-busy"].threads) == (2, 4)
    assert [w.worker_id for w in obs["video"].workers] == ["w-other"]
    assert busy_by_pod(obs["mail"].workers) == {"pod-a": 2, "pod-b": 0}


def test_shared_types_are_read_once_and_each_scaler_gets_its_own_lead(
    r: redis.Redis, keys: Keys
) -> None:
    now = redis_ms(r)
    r.zadd(keys.delayed("shared"), {envelope("shared", 1): now + 20_000})
    push_ready(r, keys, "shared", DEFAULT_PRIORITY, envelope("shared", 2))

    obs = Observer(r, keys).observe(
        {
            "short": ObserveRequest(("shared",), lead_s=5),
            "long": ObserveRequest(("shared", "extra"), lead_s=60),
        }
    )

    assert obs["short"].types["shared"].upcoming == 0
    assert obs["long"].types["shared"].upcoming == 1
    assert obs["short"].types["shared"].queued == obs["long"].types["shared"].queued == 1
    assert obs["short"].at == obs["long"].at


def test_tasks_from_the_producer_are_seen_as_queued_and_upcoming(
    r: redis.Redis, keys: Keys
) -> None:
    producer = Producer(r, keys=keys)
    producer.enqueue_many("email", [Call(kwargs={"n": n}) for n in range(3)])
    producer.enqueue("email", priority="high")
    producer.enqueue("email", delay=10)
    producer.enqueue("email", delay=120)

    t = Observer(r, keys).observe({"s": ObserveRequest(("email",), 30)})["s"].types["email"]

    assert (t.queued, t.due, t.upcoming, t.enqueued_total) == (4, 0, 1, 6)


def test_observe_is_one_round_trip_for_all_scalers(redis_url: str, keys: Keys) -> None:
    pool = redis.ConnectionPool.from_url(redis_url, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool)
    spy = redis.Redis.from_url(redis_url)
    for i in range(50):
        push_ready(spy, keys, f"t{i}", i % 10, envelope(f"t{i}", i))
    requests = {
        f"scaler{s}": ObserveRequest(tuple(f"t{i}" for i in range(s, 50, 5)), 30) for s in range(5)
    }
    observer = Observer(client, keys)
    observer.observe(requests)  # the first call may load the script
    calls_before = evalsha_calls(spy)
    CountingConnection.sends = 0

    obs = observer.observe(requests)

    assert CountingConnection.sends == 1
    assert evalsha_calls(spy) - calls_before == 1
    assert sum(t.queued for o in obs.values() for t in o.types.values()) == 50
    client.close()
    spy.close()


def test_observe_reloads_its_script_after_a_script_flush(r: redis.Redis, keys: Keys) -> None:
    push_ready(r, keys, "email", DEFAULT_PRIORITY, envelope("email", 1))
    observer = Observer(r, keys)
    observer.observe({"s": ObserveRequest(("email",), 0)})
    r.script_flush()

    assert observer.observe({"s": ObserveRequest(("email",), 0)})["s"].types["email"].queued == 1


def test_data_that_breaks_the_schema_raises_instead_of_reading_as_idle(
    r: redis.Redis, keys: Keys
) -> None:
    r.hset(keys.active, "email", "not-a-number")

    with pytest.raises(redis.DataError):
        Observer(r, keys).observe({"s": ObserveRequest(("email",), 0)})


def test_a_type_name_that_would_change_key_names_is_refused(r: redis.Redis, keys: Keys) -> None:
    with pytest.raises(ValueError, match="task type"):
        Observer(r, keys).observe({"s": ObserveRequest(("a}:b",), 0)})


def test_observe_raises_a_redis_error_when_redis_is_unreachable(keys: Keys) -> None:
    server = RedisServer()
    client = redis.Redis(port=server.port, socket_connect_timeout=0.5)  # nothing listens

    with pytest.raises(redis.RedisError):
        Observer(client, keys).observe({"s": ObserveRequest(("email",), 0)})


# --- the demand listener --------------------------------------------------------------


def start_listener(client: redis.Redis, keys: Keys) -> tuple[DemandListener, queue.Queue[str]]:
    got: queue.Queue[str] = queue.Queue()
    listener = DemandListener(
        client, keys, got.put, settings=ListenerSettings(poll_s=0.1, retry_max_s=0.5)
    )
    listener.start()
    assert listener.wait_subscribed(10)
    return listener, got


def test_listener_calls_back_with_the_published_type(r: redis.Redis, keys: Keys) -> None:
    listener, got = start_listener(r, keys)
    try:
        r.publish(keys.demand_channel, "email")
        assert got.get(timeout=10) == "email"
    finally:
        listener.stop()


def test_listener_hears_the_producer_when_a_queue_goes_from_empty_to_non_empty(
    r: redis.Redis, keys: Keys
) -> None:
    listener, got = start_listener(r, keys)
    try:
        Producer(r, keys=keys).enqueue("video")
        assert got.get(timeout=10) == "video"
    finally:
        listener.stop()


def test_listener_survives_an_exception_in_its_callback(r: redis.Redis, keys: Keys) -> None:
    got: queue.Queue[str] = queue.Queue()

    def on_demand(task_type: str) -> None:
        if task_type == "boom":
            raise RuntimeError("callback failed")
        got.put(task_type)

    listener = DemandListener(r, keys, on_demand, settings=ListenerSettings(poll_s=0.1))
    listener.start()
    try:
        assert listener.wait_subscribed(10)
        r.publish(keys.demand_channel, "boom")
        r.publish(keys.demand_channel, "sms")
        assert got.get(timeout=10) == "sms"
    finally:
        listener.stop()


def test_listener_resubscribes_after_redis_restarts(keys: Keys) -> None:
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url, socket_timeout=2, socket_connect_timeout=1)
        listener, got = start_listener(client, keys)
        try:
            server.restart()
            publisher = redis.Redis.from_url(server.url)
            deadline = time.monotonic() + 30
            received = None
            while received is None and time.monotonic() < deadline:
                publisher.publish(keys.demand_channel, "video")  # until resubscribed
                try:
                    received = got.get(timeout=0.2)
                except queue.Empty:
                    continue
            assert received == "video"
            publisher.close()
        finally:
            listener.stop()
            client.close()


def test_listener_stop_ends_its_thread(r: redis.Redis, keys: Keys) -> None:
    def listeners() -> int:
        return sum(t.name == "taskscale-demand-listener" for t in threading.enumerate())

    before = listeners()
    listener, _ = start_listener(r, keys)
    assert listeners() == before + 1

    listener.stop()

    assert listeners() == before


def test_listener_reports_each_connection_error(keys: Keys) -> None:
    from support.redis_server import free_port
    from taskscale.controller.metrics import ControllerMetrics

    metrics = ControllerMetrics()
    dead = redis.Redis(port=free_port(), socket_connect_timeout=1)
    listener = DemandListener(
        dead,
        keys,
        lambda _: None,
        settings=ListenerSettings(poll_s=0.1, retry_initial_s=0.05, retry_max_s=0.1),
        on_error=lambda exc: metrics.count_redis_error("demand", "ns/a", "ns/b"),
    )
    listener.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            value = metrics.registry.get_sample_value(
                "taskscale_redis_errors_total",
                {"operation": "demand", "namespace": "ns", "name": "b"},
            )
            if value and value >= 2:
                break
            time.sleep(0.05)
        assert value is not None and value >= 2  # counted on every failed attempt
    finally:
        listener.stop()
        dead.close()


def test_observation_counts_live_schedulers(r: redis.Redis, keys: Keys) -> None:
    from taskscale.scheduling.scheduler import Scheduler, SchedulerSettings

    observer = Observer(r, keys)
    request = {"s": ObserveRequest(("email",), 0)}
    assert observer.observe(request)["s"].schedulers_alive == 0
    scheduler = Scheduler(r, keys=keys, settings=SchedulerSettings(lease_s=30))
    scheduler.beat()
    assert observer.observe(request)["s"].schedulers_alive == 1
    scheduler.beat(stopping=True)
    assert observer.observe(request)["s"].schedulers_alive == 0
