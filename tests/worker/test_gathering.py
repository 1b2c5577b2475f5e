"""Claims and outcome flushes gathered over a moment (taskscale/worker/gathering.py),
and the per-task caches of the executor path: each remembered answer must be
the one computing it afresh gives."""

from __future__ import annotations

from taskscale.options import TaskOptions, resolve
from taskscale.tasks import TaskRegistry
from taskscale.worker.execution import RetryPolicy, TaskRunner
from taskscale.worker.gathering import Gather


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_gather_holds_back_only_after_a_round_trip_that_left_work() -> None:
    t = FakeTime()
    gather = Gather(0.001, clock=t.clock, sleep=t.sleep)
    assert gather.pause() == 0.0  # nothing done yet: go at once
    gather.done(more=False)  # the queues ran dry: the next claim is not held back
    assert gather.pause() == 0.0
    gather.done(more=True)
    t.now += 0.0004
    assert abs(gather.pause() - 0.0006) < 1e-9  # the rest of the moment
    assert abs(t.now - 100.001) < 1e-9
    gather.done(more=True)
    t.now += 0.002  # the moment has passed already: no sleep
    assert gather.pause() == 0.0
    assert len(t.slept) == 1


def test_gather_with_no_interval_never_sleeps() -> None:
    t = FakeTime()
    gather = Gather(0.0, clock=t.clock, sleep=t.sleep)
    gather.done(more=True)
    assert gather.pause() == 0.0 and t.slept == []


def test_resolve_remembers_per_value_and_type_of_each_field() -> None:
    declared = TaskOptions(max_retries=7, timeout=2.0)
    plain = resolve({"id": "a"}, declared)
    assert (plain.max_retries, plain.timeout) == (7, 2.0)
    assert resolve({"id": "b"}, declared) is plain  # the same combination: remembered
    # True == 1 and hash alike, but a bool is malformed (unset), 1 is one retry
    assert resolve({"max_retries": True}, declared).max_retries == 7
    assert resolve({"max_retries": 1}, declared).max_retries == 1
    assert resolve({"max_retries": 1.0}, declared).max_retries == 1
    assert resolve({"max_retries": True}, declared).max_retries == 7
    # another declaration is another answer
    assert resolve({"id": "c"}, TaskOptions(max_retries=2)).max_retries == 2
    # a schedule (a list) is not hashable: resolved each time, still right
    got = resolve({"retry_backoff_ms": [0, 5000]}, None)
    assert got.backoff_schedule_s == (0.0, 5.0)
    assert resolve({"retry_backoff_ms": [1000]}, None).backoff_schedule_s == (1.0,)


def test_an_argument_shape_that_bound_once_still_fails_with_other_arguments() -> None:
    registry = TaskRegistry()

    def add(a: int, b: int = 0) -> int:
        return a + b

    registry.register("add", add)
    runner = TaskRunner(registry, worker_id="w", retry=RetryPolicy(), max_lost=5)
    assert runner._bind_error(add, [1], {}) is None
    assert runner._bind_error(add, [1], {}) is None  # remembered
    assert runner._bind_error(add, [1], {"b": 2}) is None
    assert runner._bind_error(add, [1, 2, 3], {}) is not None  # too many
    assert runner._bind_error(add, [], {}) is not None  # a missing
    assert runner._bind_error(add, [1], {"c": 2}) is not None  # an unknown name
    assert runner._bind_error(add, [1, 2, 3], {}) is not None  # failures are not remembered
