"""The pod starts the history measures from the passes (history.PodStarts):
a decision raising the desired replicas -> the pass that first sees one more
pod with a worker.  The drain cap takes the median as a pod's start when it
is shorter than half the warm-up lead (test_rule_drain_cap.py)."""

from __future__ import annotations

from taskscale.controller.history import History, PodStarts
from taskscale.controller.types import Decision, Observation, ReasonCode, WorkerObservation


def test_each_pod_is_timed_from_its_ask_to_its_first_ready_pass() -> None:
    starts = PodStarts(max_age_s=60.0)
    starts.record(0.0, desired=0, ready=0)
    assert starts.median() is None
    starts.record(1.0, desired=3, ready=0)  # three asked at 1 s
    starts.record(7.0, desired=3, ready=1)
    starts.record(9.0, desired=3, ready=3)
    assert starts.median() == 8.0  # 6, 8, 8
    starts.record(20.0, desired=4, ready=3)
    starts.record(24.0, desired=4, ready=4)  # 4 s: 4, 6, 8, 8 -> the upper middle
    assert starts.median() == 8.0
    starts.record(30.0, desired=4, ready=2)  # pods lost and back: nothing asked, nothing timed
    starts.record(31.0, desired=4, ready=4)
    starts.record(32.0, desired=4, ready=4)
    assert starts.median() == 8.0  # a 1 s sample would make it 6


def test_a_scale_down_forgets_the_latest_asked_first() -> None:
    starts = PodStarts(max_age_s=60.0)
    starts.record(0.0, desired=2, ready=2)
    starts.record(1.0, desired=4, ready=2)  # two asked at 1 s
    starts.record(3.0, desired=5, ready=2)  # one more at 3 s
    starts.record(4.0, desired=3, ready=2)  # two go: the one of 3 s and one of 1 s
    starts.record(9.0, desired=3, ready=3)
    assert starts.median() == 8.0  # the pod asked at 1 s
    starts.record(12.0, desired=3, ready=4)  # a pod nobody asked for: not timed
    assert starts.median() == 8.0


def test_a_pod_never_up_is_forgotten_after_max_age() -> None:
    starts = PodStarts(max_age_s=30.0)
    starts.record(0.0, desired=0, ready=0)
    starts.record(1.0, desired=1, ready=0)  # a failed scale, a crash loop
    starts.record(40.0, desired=1, ready=0)
    starts.record(41.0, desired=1, ready=1)
    assert starts.median() is None


def observation(at: float, pods: int, processes: int = 2) -> Observation:
    """``pods`` pods of ``processes`` worker processes each."""
    workers = tuple(
        WorkerObservation(f"w{p}-{i}", f"pod-{p}", ("a",), 4, 0)
        for p in range(pods)
        for i in range(processes)
    )
    return Observation(at=at, types={}, workers=workers)


def decision(desired: int) -> Decision:
    return Decision(desired, ReasonCode.DEMAND, "...")


def test_the_history_times_pods_not_worker_processes_and_skips_unread_passes() -> None:
    history = History(max_age_s=120.0, sample_every_s=5.0)
    history.record(0.0, observation(0.0, 1), decision(1))
    history.record(2.0, observation(2.0, 1), decision(3))
    history.record(4.0, None, decision(3))  # Redis unread: no pods seen, nothing timed
    history.record(6.0, observation(6.0, 2), decision(3))
    history.record(8.0, observation(8.0, 3), decision(3))
    assert history.pod_start_s() == 6.0  # 4 and 6 s, two pods of two processes each
