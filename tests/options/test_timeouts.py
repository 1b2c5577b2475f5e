"""The run-timeout mechanism in one process, without Redis: what it
interrupts, what it cannot, and that it never leaks into the caller."""

from __future__ import annotations

import time

import pytest

from taskscale.metrics import WorkerMetrics
from taskscale.options import TaskOptions
from taskscale.tasks import TaskRegistry
from taskscale.worker.execution import Claimed, RetryPolicy, TaskRunner
from taskscale.worker.timeouts import RunTimeout, call_with_timeout


def python_loop(seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return "ran to the end"


def swallowing(seconds: float) -> str:
    try:
        python_loop(seconds)
    except Exception:
        return "caught it"
    return "ran to the end"


def test_python_code_is_interrupted_at_the_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(RunTimeout, match=r"timeout of 0\.2 s"):
        call_with_timeout(python_loop, [10.0], {}, 0.2)
    assert time.monotonic() - started < 5.0  # far less than the 10 s it would run


def test_a_run_that_swallows_the_exception_is_still_failed() -> None:
    with pytest.raises(RunTimeout):
        call_with_timeout(swallowing, [10.0], {}, 0.2)


def test_a_blocking_c_call_finishes_before_the_exception_is_raised() -> None:
    started = time.monotonic()
    with pytest.raises(RunTimeout):
        call_with_timeout(time.sleep, [0.6], {}, 0.1)
    assert time.monotonic() - started >= 0.6


def test_runs_within_their_timeout_return_and_leave_nothing_pending() -> None:
    for _ in range(200):
        assert call_with_timeout(lambda: 1, [], {}, 0.5) == 1
    with pytest.raises(ValueError, match="own error"):
        call_with_timeout(lambda: (_ for _ in ()).throw(ValueError("own error")), [], {}, 0.5)
    # Past every deadline armed above: a watchdog left armed would strike here.
    assert python_loop(0.8) == "ran to the end"


def test_a_timed_out_run_is_a_failure_counted_in_the_metrics() -> None:
    registry = TaskRegistry()
    registry.register("loop", python_loop, TaskOptions(timeout=0.2, max_retries=0))
    metrics = WorkerMetrics(types=("loop",), threads=1)
    runner = TaskRunner(registry, worker_id="w", retry=RetryPolicy(), max_lost=5, metrics=metrics)
    raw = b'{"id":"t1","type":"loop","args":[10],"kwargs":{}}'
    outcome = runner.run(Claimed("loop", "t1", raw, 0))
    assert (outcome.kind, outcome.error.split(":")[0]) == ("dead", "RunTimeout")
    value = metrics.registry.get_sample_value(
        "taskscale_worker_task_timeouts_total", {"type": "loop"}
    )
    assert value == 1.0
