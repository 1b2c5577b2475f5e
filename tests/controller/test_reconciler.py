"""The reconciler against a real Redis: observe, decide, apply, report.

The actuator here is an in-memory number (the Kubernetes one is tested
against a real API server in tests/kube); everything Redis-side is real.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from support.controller import MemoryActuator, enqueue, finish_tasks, register_worker, start_tasks
from support.redis_server import RedisServer, free_port
from support.waiting import wait_until
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.metrics import ControllerMetrics
from taskscale.controller.reconciler import (
    PassOutcome,
    Problem,
    Reconciler,
    ReconcilerSettings,
    RetrySettings,
)
from taskscale.controller.rules.base import Fallback, Pause
from taskscale.controller.types import ReasonCode, ScalingPolicy, TypePolicy
from taskscale.keys import Keys

pytestmark = pytest.mark.integration

FAST_RETRIES = RetrySettings(attempts=3, initial_s=0.01, max_s=0.02)


class ListReporter:
    """Keeps every outcome, for assertions."""

    def __init__(self) -> None:
        self.outcomes: list[PassOutcome] = []
        self.lock = threading.Lock()

    def report(self, outcome: PassOutcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)


def split(key: str) -> dict[str, str]:
    """A scaler key as the metrics' namespace and name labels."""
    namespace, name = key.split("/")
    return {"namespace": namespace, "name": name}


def scaler(
    *,
    types: tuple[TypePolicy, ...] = (TypePolicy("email", idle_threshold_s=0.5),),
    min_replicas: int = 0,
    tasks_per_replica: int = 1,
    poll_s: float = 3600.0,
    key_namespace: str = "taskscale",
) -> ScalerConfig:
    policy = ScalingPolicy(
        types=types,
        tasks_per_replica=tasks_per_replica,
        min_replicas=min_replicas,
        max_replicas=10,
        scale_down_stabilization_s=0.0,
    )
    return ScalerConfig(
        name="emails",
        namespace="default",
        target="email-worker",
        redis=RedisRef(url="unused", key_namespace=key_namespace),
        policy=policy,
        poll_interval_s=poll_s,
    )


@pytest.fixture
def reporter() -> ListReporter:
    return ListReporter()


@pytest.fixture
def reconciler(reporter: ListReporter) -> Iterator[Reconciler]:
    settings = ReconcilerSettings(
        redis=FAST_RETRIES, redis_timeout_s=0.5, error_backoff_initial_s=0.2
    )
    rec = Reconciler(reporter=reporter, metrics=ControllerMetrics(), settings=settings)
    yield rec
    rec.close()


def test_queued_tasks_scale_a_target_from_zero_to_demand(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(replicas=0)
    config = scaler()
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    enqueue(r, keys, "email", 3)

    outcome = reconciler.reconcile_now(config.key)

    assert actuator.replicas == 3
    assert outcome.scaled and outcome.ok
    assert outcome.current == 0
    assert outcome.decision is not None and outcome.decision.reason.startswith("0 -> 3")
    assert outcome.observation is not None and outcome.observation.types["email"].queued == 3
    assert (
        reconciler.metrics.sample(
            "taskscale_scale_events_total",
            {**split(config.key), "direction": "up", "reason": outcome.decision.reason_code},
        )
        == 1.0
    )


def test_target_is_held_while_tasks_run_and_released_after_idle_threshold(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(replicas=0)
    config = scaler(types=(TypePolicy("email", idle_threshold_s=1.0),))
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    enqueue(r, keys, "email", 2)
    reconciler.reconcile_now(config.key)
    start_tasks(r, keys, "email", 2)

    reconciler.reconcile_now(config.key)
    assert actuator.replicas == 2  # running tasks hold their replicas

    finish_tasks(r, keys, "email", 2)
    held = reconciler.reconcile_now(config.key)
    assert actuator.replicas == 1  # idle, but not for 1 s yet: one replica stays warm
    assert held.decision is not None and held.decision.reason_code == ReasonCode.WAITING_IDLE

    def pass_that_scaled() -> PassOutcome | None:
        outcome = reconciler.reconcile_now(config.key)
        return outcome if outcome.scaled else None

    released = wait_until(pass_that_scaled, timeout=20, what="scale to zero after idle threshold")
    assert actuator.replicas == 0
    assert released.decision is not None
    assert released.decision.reason_code == ReasonCode.IDLE


def test_demand_signal_wakes_a_scaler_at_zero_long_before_its_poll_interval(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(replicas=0)
    config = scaler(poll_s=3600.0)
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    loop = threading.Thread(target=reconciler.run, daemon=True)
    loop.start()
    try:
        assert reconciler.wait_listening(10)
        wait_until(
            lambda: (
                reconciler.metrics.sample("taskscale_current_replicas", split(config.key)) == 0.0
            ),
            what="first pass",
        )
        enqueue(r, keys, "email", 2)  # publishes the demand signal
        wait_until(lambda: actuator.replicas == 2, timeout=30, what="scale-up on demand")
    finally:
        reconciler.stop()
        loop.join(10)
    assert not loop.is_alive()


def test_demand_signal_for_another_type_does_not_wake_the_scaler(
    reconciler: Reconciler, reporter: ListReporter, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(replicas=0)
    config = scaler(poll_s=3600.0)
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    reconciler.reconcile_due()  # the first pass, due at once
    assert reconciler.wait_listening(10)
    enqueue(r, keys, "sms", 2)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # give a wrong wake-up time to happen
        reconciler.reconcile_due()
        time.sleep(0.02)
    assert len(reporter.outcomes) == 1

    enqueue(r, keys, "email", 1)

    def woken() -> bool:
        reconciler.reconcile_due()
        return len(reporter.outcomes) == 2

    wait_until(woken, timeout=10, what="email demand wake")
    assert actuator.replicas == 1


def test_unreachable_redis_holds_replicas_reports_and_counts_every_attempt(
    reconciler: Reconciler, reporter: ListReporter
) -> None:
    actuator = MemoryActuator(replicas=3)
    config = scaler()
    reconciler.upsert(config, actuator=actuator, redis_url=f"redis://127.0.0.1:{free_port()}/0")

    outcome = reconciler.reconcile_now(config.key)

    assert actuator.replicas == 3 and not actuator.calls
    assert outcome.problem == Problem.REDIS_UNREACHABLE
    assert outcome.redis_error and "Connection" in outcome.redis_error
    assert outcome.decision is not None
    assert outcome.decision.reason_code == ReasonCode.FAIL_STATIC
    assert reconciler.metrics.sample(
        "taskscale_redis_errors_total", {"operation": "observe", **split(config.key)}
    ) == float(FAST_RETRIES.attempts)


def test_demand_listener_errors_count_for_every_scaler_of_that_redis_only(
    reconciler: Reconciler, redis_url: str
) -> None:
    """The listener the reconciler itself opens per Redis counts each of its
    failures as an ``operation="demand"`` error of the scalers on that Redis
    (the counter once stayed 0 while the log repeated the listener's errors)."""
    on_stopped, on_healthy = scaler(), dataclasses.replace(scaler(), name="thumbs")

    def demand_errors(config: ScalerConfig) -> float:
        labels = {"operation": "demand", **split(config.key)}
        return reconciler.metrics.sample("taskscale_redis_errors_total", labels) or 0.0

    with RedisServer() as server:
        reconciler.upsert(on_stopped, actuator=MemoryActuator(replicas=0), redis_url=server.url)
        reconciler.upsert(on_healthy, actuator=MemoryActuator(replicas=0), redis_url=redis_url)
        assert reconciler.wait_listening(10)
        assert demand_errors(on_stopped) == 0.0 and demand_errors(on_healthy) == 0.0

        server.stop()  # the subscribed connection drops; every resubscription is refused
        wait_until(
            lambda: demand_errors(on_stopped) >= 2,
            timeout=30,
            what="the demand listener's failures counted",
        )
    assert demand_errors(on_healthy) == 0.0
    assert (
        reconciler.metrics.sample(
            "taskscale_redis_errors_total", {"operation": "observe", **split(on_stopped.key)}
        )
        == 0.0
    )  # no pass ran: only the listener saw the outage


def test_failed_pass_is_retried_after_a_backoff_not_the_poll_interval(
    reconciler: Reconciler,
) -> None:
    config = scaler(poll_s=3600.0)
    reconciler.upsert(
        config, actuator=MemoryActuator(replicas=1), redis_url=f"redis://127.0.0.1:{free_port()}/0"
    )
    delay = reconciler.reconcile_due()
    assert 0 < delay <= 0.2  # error_backoff_initial_s


def test_missing_target_is_reported_and_nothing_is_scaled(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(missing=True)
    config = scaler()
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    enqueue(r, keys, "email", 2)

    outcome = reconciler.reconcile_now(config.key)

    assert outcome.problem == Problem.TARGET_NOT_FOUND
    assert "not found" in outcome.message
    assert outcome.current is None and not outcome.scaled and not actuator.calls


def test_scale_down_hands_the_actuator_busy_counts_per_pod(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(replicas=3)
    config = scaler(tasks_per_replica=1)
    register_worker(r, keys, worker_id="w1", pod="pod-a", types="email", busy=1)
    register_worker(r, keys, worker_id="w2", pod="pod-b", types="email", busy=0)
    register_worker(r, keys, worker_id="w3", pod="pod-c", types="other", busy=2)
    enqueue(r, keys, "email", 1)
    start_tasks(r, keys, "email", 1)
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)

    reconciler.reconcile_now(config.key)

    assert actuator.replicas == 1
    # The worker of another type is not this scaler's business.
    assert actuator.calls == [(1, {"pod-a": 1, "pod-b": 0})]


def test_scalers_on_one_redis_are_observed_in_one_round_trip(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    a, b = MemoryActuator(), MemoryActuator()
    first = scaler()
    second = ScalerConfig(
        name="sms",
        namespace="default",
        target="sms-worker",
        redis=first.redis,
        policy=ScalingPolicy(types=(TypePolicy("sms"),), tasks_per_replica=1),
        poll_interval_s=3600.0,
    )
    reconciler.upsert(first, actuator=a, redis_url=redis_url)
    reconciler.upsert(second, actuator=b, redis_url=redis_url)
    enqueue(r, keys, "email", 1)
    enqueue(r, keys, "sms", 2)
    before = int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))

    reconciler.reconcile_due()

    after = int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    assert (a.replicas, b.replicas) == (1, 2)
    assert after - before == 1


def test_removed_scaler_is_not_reconciled_and_its_series_are_dropped(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator()
    config = scaler()
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    reconciler.reconcile_due()
    assert reconciler.metrics.sample("taskscale_desired_replicas", split(config.key)) == 0.0

    reconciler.remove(config.key)
    enqueue(r, keys, "email", 2)
    reconciler.wake()
    reconciler.reconcile_due()

    assert actuator.replicas == 0
    assert reconciler.keys() == []
    assert reconciler.metrics.sample("taskscale_desired_replicas", split(config.key)) is None


def test_changed_spec_is_reconciled_at_once(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator()
    config = scaler(poll_s=3600.0)
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    enqueue(r, keys, "email", 4)
    reconciler.reconcile_due()
    assert actuator.replicas == 4

    wider = scaler(poll_s=3600.0, tasks_per_replica=2)
    reconciler.upsert(wider, actuator=actuator, redis_url=redis_url)
    reconciler.reconcile_due()

    assert actuator.replicas == 2


def test_a_stopped_reconciler_ignores_late_registrations(
    reconciler: Reconciler, redis_url: str
) -> None:
    reconciler.stop()
    reconciler.upsert(scaler(), actuator=MemoryActuator(), redis_url=redis_url)
    assert reconciler.keys() == []


def test_fallback_counts_failed_passes_in_a_row_and_a_good_read_resets_it(
    reconciler: Reconciler,
) -> None:
    port = free_port()
    actuator = MemoryActuator(replicas=1)
    config = dataclasses.replace(scaler(), fallback=Fallback(replicas=4, after_failures=2))
    reconciler.upsert(config, actuator=actuator, redis_url=f"redis://127.0.0.1:{port}/0")

    first = reconciler.reconcile_now(config.key)
    assert first.decision is not None and first.decision.reason_code == ReasonCode.FAIL_STATIC
    assert actuator.replicas == 1  # one failure: still fail-static
    second = reconciler.reconcile_now(config.key)
    assert second.decision is not None and second.decision.reason_code == ReasonCode.FALLBACK
    assert actuator.replicas == 4 and second.problem == Problem.REDIS_UNREACHABLE

    with RedisServer(port=port):  # back and empty: the policy decides again
        back = reconciler.reconcile_now(config.key)
        assert back.ok and back.decision is not None
        assert back.decision.reason_code == ReasonCode.IDLE and actuator.replicas == 0
    again = reconciler.reconcile_now(config.key)  # down again: the count restarted at 1
    assert again.decision is not None and again.decision.reason_code == ReasonCode.FAIL_STATIC


def test_a_paused_scaler_is_not_sized_by_the_policy(
    reconciler: Reconciler, r: redis.Redis, redis_url: str, keys: Keys
) -> None:
    actuator = MemoryActuator(replicas=0)
    config = dataclasses.replace(scaler(), pause=Pause(replicas=2))
    reconciler.upsert(config, actuator=actuator, redis_url=redis_url)
    enqueue(r, keys, "email", 5)

    outcome = reconciler.reconcile_now(config.key)
    assert actuator.replicas == 2 and outcome.ok
    assert outcome.decision is not None and outcome.decision.reason_code == ReasonCode.PAUSED
    assert outcome.observation is not None  # still observed: status and metrics stay current

    resumed = dataclasses.replace(config, pause=None)
    reconciler.upsert(resumed, actuator=actuator, redis_url=redis_url)
    reconciler.reconcile_now(config.key)
    assert actuator.replicas == 5
