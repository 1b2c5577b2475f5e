"""A pod may run several worker processes (``taskscale worker --processes P``),
each registered on its own: the controller counts them per pod -- busy
tasks summed for pod-deletion-cost, busy pods counted once -- and the
threads check sums their threads (pure: no Redis, no Kubernetes)."""

from __future__ import annotations

from taskscale.controller.policy import History, decide
from taskscale.controller.threads_check import check_threads
from taskscale.controller.types import (
    Observation,
    ReasonCode,
    ScalingPolicy,
    TypeObservation,
    TypePolicy,
    WorkerObservation,
    busy_by_pod,
)

T0 = 1_763_750_000.0
POD = "worker-7d9f8b6c5-abcde"


def process(worker_id: str, pod: str, busy: int, threads: int = 2) -> WorkerObservation:
    return WorkerObservation(worker_id=worker_id, pod=pod, types=("a",), threads=threads, busy=busy)


# two processes of one pod, each running a task; two idle pods
WORKERS = (
    process(f"{POD}-1-x-0", POD, 1),
    process(f"{POD}-1-x-1", POD, 1),
    process("worker-7d9f8b6c5-fghij-0", "worker-7d9f8b6c5-fghij", 0),
    process("worker-7d9f8b6c5-klmno-0", "worker-7d9f8b6c5-klmno", 0),
)


def test_two_processes_of_one_pod_are_one_pod_with_their_busy_counts_summed() -> None:
    assert busy_by_pod(WORKERS) == {
        POD: 2,
        "worker-7d9f8b6c5-fghij": 0,
        "worker-7d9f8b6c5-klmno": 0,
    }


def test_a_pod_with_two_busy_processes_holds_one_replica_not_two() -> None:
    policy = ScalingPolicy(
        types=(TypePolicy("a", idle_threshold_s=300.0),),
        tasks_per_replica=4,
        min_replicas=0,
        max_replicas=10,
        scale_up_stabilization_s=0.0,
        scale_down_stabilization_s=0.0,
    )
    observation = Observation(
        at=T0,
        types={"a": TypeObservation("a", active=2, idle_since=T0)},
        workers=WORKERS,
    )
    decision = decide(observation, policy, History(), now=T0, current=3)
    # counting workers instead of pods would keep 2 replicas
    assert decision.desired == 1
    assert decision.reason_code == ReasonCode.HOLD_ACTIVE


def test_threads_per_pod_are_the_sum_over_its_processes() -> None:
    found = check_threads(deployment="worker", tasks_per_replica=4, workers=WORKERS[:2])
    assert found is not None and found.matches
    assert found.pods_by_threads == {4: (POD,)}
