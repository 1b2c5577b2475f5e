"""The metrics port serves /metrics, /healthz and /readyz; error series exist
before the first error; a deleted scaler's series go away."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis

from support.controller import push_ready
from taskscale.controller.metrics import (
    API_OPERATIONS,
    REDIS_OPERATIONS,
    ControllerMetrics,
)
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.controller.policy import History, decide
from taskscale.controller.types import (
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
)
from taskscale.health import HealthState, MetricsServer
from taskscale.keys import DEFAULT_PRIORITY, Keys


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def served(clock: Clock) -> Iterator[tuple[ControllerMetrics, HealthState, str]]:
    metrics = ControllerMetrics()
    health = HealthState(clock=clock, stale_after_s=30)
    server = MetricsServer(metrics.registry, health, host="127.0.0.1", port=0).start()
    yield metrics, health, f"http://127.0.0.1:{server.port}"
    server.stop()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_error_counters_exist_at_zero_for_every_operation() -> None:
    metrics = ControllerMetrics()
    unscoped = {"namespace": "", "name": ""}
    for op in REDIS_OPERATIONS:
        labels = {"operation": op, **unscoped}
        assert metrics.sample("taskscale_redis_errors_total", labels) == 0.0
    for op in API_OPERATIONS:
        labels = {"operation": op, **unscoped}
        assert metrics.sample("taskscale_kube_api_errors_total", labels) == 0.0


def test_a_scalers_error_counters_start_at_zero_and_count_for_that_scaler_only() -> None:
    metrics = ControllerMetrics()
    metrics.add_scaler("shop/emails", max_replicas=7)
    metrics.add_scaler("shop/thumbs", max_replicas=3)
    emails = {"namespace": "shop", "name": "emails"}
    thumbs = {"namespace": "shop", "name": "thumbs"}
    for op in REDIS_OPERATIONS:
        assert metrics.sample("taskscale_redis_errors_total", {"operation": op, **thumbs}) == 0
    assert (
        metrics.sample("taskscale_kube_api_errors_total", {"operation": "get_scale", **emails}) == 0
    )
    # calls made for no scaler have no scaler series
    assert (
        metrics.sample("taskscale_kube_api_errors_total", {"operation": "lease", **emails}) is None
    )
    metrics.count_redis_error("observe", "shop/emails", "shop/thumbs")
    metrics.count_api_error("get_scale", "shop/emails")
    assert metrics.sample("taskscale_redis_errors_total", {"operation": "observe", **thumbs}) == 1
    assert (
        metrics.sample("taskscale_kube_api_errors_total", {"operation": "get_scale", **emails}) == 1
    )
    assert (
        metrics.sample("taskscale_kube_api_errors_total", {"operation": "get_scale", **thumbs}) == 0
    )
    assert metrics.sample("taskscale_max_replicas", emails) == 7
    metrics.forget_scaler("shop/emails", ())
    assert (
        metrics.sample("taskscale_kube_api_errors_total", {"operation": "get_scale", **emails})
        is None
    )
    assert metrics.sample("taskscale_max_replicas", emails) is None


def test_unknown_operation_and_reason_labels_collapse_to_other() -> None:
    metrics = ControllerMetrics()
    metrics.count_api_error("some-new-call")
    metrics.record_scale("ns/a", before=1, after=0, reason="made up")
    other = {"operation": "other", "namespace": "", "name": ""}
    assert metrics.sample("taskscale_kube_api_errors_total", other) == 1.0
    labels = {"namespace": "ns", "name": "a", "direction": "down", "reason": "other"}
    assert metrics.sample("taskscale_scale_events_total", labels) == 1.0


def test_metrics_endpoint_serves_the_registry(
    served: tuple[ControllerMetrics, HealthState, str],
) -> None:
    metrics, _, base = served
    metrics.record_decision("ns/a", current=2, desired=5, reason="Demand")
    status, body = get(base + "/metrics")
    assert status == 200
    assert 'taskscale_desired_replicas{name="a",namespace="ns"} 5.0' in body
    assert 'taskscale_redis_errors_total{name="",namespace="",operation="observe"} 0.0' in body


def test_readyz_turns_ready_only_when_told_and_healthz_fails_when_the_loop_stalls(
    served: tuple[ControllerMetrics, HealthState, str], clock: Clock
) -> None:
    _, health, base = served
    assert get(base + "/healthz")[0] == 200
    assert get(base + "/readyz")[0] == 503
    health.set_ready(True)
    assert get(base + "/readyz")[0] == 200
    clock.now += 31  # no heartbeat for longer than stale_after_s
    assert get(base + "/healthz")[0] == 503
    assert get(base + "/readyz")[0] == 503
    health.beat()
    assert get(base + "/healthz")[0] == 200
    assert get(base + "/nope")[0] == 404


def test_observed_idle_seconds_are_zero_while_busy_and_age_when_idle() -> None:
    metrics = ControllerMetrics()
    observation = Observation(
        at=1100.0,
        types={
            "busy": TypeObservation("busy", active=1, idle_since=1000.0),
            "idle": TypeObservation("idle", idle_since=1000.0),
        },
    )
    metrics.record_observation("ns/a", observation)
    busy = {"namespace": "ns", "name": "a", "type": "busy"}
    idle = {"namespace": "ns", "name": "a", "type": "idle"}
    assert metrics.sample("taskscale_observed_idle_seconds", busy) == 0.0
    assert metrics.sample("taskscale_observed_idle_seconds", idle) == 100.0
    metrics.forget_scaler("ns/a", ("busy", "idle"))
    assert metrics.sample("taskscale_observed_active_tasks", busy) is None


def test_observation_exports_schedulers_overdue_age_and_redis_counters() -> None:
    metrics = ControllerMetrics()
    observation = Observation(
        at=1100.0,
        types={
            "mail": TypeObservation(
                "mail",
                due=2,
                oldest_due_s=42.5,
                completed_total=9,
                failed_total=4,
                dead_total=3,
                cancelled_total=5,
                unique_hits_total=6,
                dead_dropped_total=7,
            )
        },
        schedulers_alive=0,
    )
    metrics.record_observation("ns/a", observation)
    scaler, mail = (
        {"namespace": "ns", "name": "a"},
        {"namespace": "ns", "name": "a", "type": "mail"},
    )
    assert metrics.sample("taskscale_observed_schedulers", scaler) == 0
    assert metrics.sample("taskscale_observed_oldest_due_seconds", mail) == 42.5
    assert metrics.sample("taskscale_observed_dead_tasks_total", mail) == 3
    assert metrics.sample("taskscale_observed_failed_runs_total", mail) == 4
    assert metrics.sample("taskscale_observed_completed_tasks_total", mail) == 9
    assert metrics.sample("taskscale_observed_cancelled_tasks_total", mail) == 5
    assert metrics.sample("taskscale_observed_unique_hits_total", mail) == 6
    assert metrics.sample("taskscale_observed_dead_dropped_tasks_total", mail) == 7
    metrics.forget_scaler("ns/a", ("mail",))
    assert metrics.sample("taskscale_observed_dead_tasks_total", mail) is None
    assert metrics.sample("taskscale_observed_schedulers", scaler) is None


@pytest.mark.integration
def test_oldest_task_age_is_what_the_queue_wait_rule_compares_due_tasks_only_with_a_scheduler(
    r: redis.Redis,
) -> None:
    keys, metrics = Keys("taskscale"), ControllerMetrics()
    seconds, micros = r.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    ready = {"id": "r", "type": "mail", "enqueued_ms": now_ms - 30_000}
    push_ready(r, keys, "mail", DEFAULT_PRIORITY, json.dumps(ready))
    r.zadd(keys.delayed("mail"), {json.dumps({"id": "d", "type": "mail"}): now_ms - 200_000})
    p = ScalingPolicy(
        types=(TypePolicy("mail", max_queue_wait_s=100.0),),
        tasks_per_replica=10,
        scale_down_stabilization_s=0.0,
    )
    mail = {"namespace": "ns", "name": "a", "type": "mail"}
    observer = Observer(r, keys)

    def observe() -> tuple[float, str]:
        observation = observer.observe({"ns/a": ObserveRequest(("mail",), 30)})["ns/a"]
        metrics.record_observation("ns/a", observation)
        d = decide(observation, p, History.for_policy(p), now=0.0, current=2)
        age = metrics.sample("taskscale_oldest_task_age_seconds", mail)
        assert age is not None
        return age, d.reason_code

    # no scheduler: the due task can't become ready, so neither the rule nor the gauge count it
    age, code = observe()
    assert 30 <= age < 100 and code != ReasonCode.QUEUE_WAIT
    overdue = metrics.sample("taskscale_observed_oldest_due_seconds", mail)
    assert overdue is not None and overdue >= 200  # still shown as overdue
    r.zadd(keys.schedulers, {"scheduler-1": now_ms + 60_000})
    age, code = observe()
    assert 200 <= age < 300 and code == ReasonCode.QUEUE_WAIT  # 200 s over the 100 s target


def test_build_info_and_process_metrics_on_controller_and_worker_registries() -> None:
    from prometheus_client import generate_latest

    import taskscale
    from taskscale.controller.metrics import ControllerMetrics
    from taskscale.metrics import WorkerMetrics

    for component, registry in (
        ("controller", ControllerMetrics().registry),
        ("worker", WorkerMetrics(types=("a",), threads=1).registry),
    ):
        assert (
            registry.get_sample_value(
                "taskscale_build_info", {"version": taskscale.__version__, "component": component}
            )
            == 1
        )
        text = generate_latest(registry).decode()
        assert "\nprocess_resident_memory_bytes " in text
        assert "\npython_info{" in text
