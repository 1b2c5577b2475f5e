"""The demo reports decision time and decision-to-first-task separately
(taskscale.demo.first_task, report.summary): the probe on a real Redis, the
pairing, and the summary's two sentences."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from support.waiting import wait_until
from taskscale.demo.first_task import TaskStarts, first_task_after
from taskscale.demo.load import Arrivals, DemoSettings, plan_load
from taskscale.demo.report import RunResult, Sample, summary
from taskscale.keys import Keys


def test_each_decision_is_paired_with_the_first_start_after_it() -> None:
    assert first_task_after([1.0, 5.0, 9.0], [0.5, 3.2, 4.0, 6.1]) == [3.2, 6.1, None]
    assert first_task_after([], [1.0]) == []


def test_the_summary_states_the_decision_and_the_first_task_apart(tmp_path: Path) -> None:
    settings = DemoSettings()
    samples = [Sample(float(t), 0, 0, 0, 0, 0, 0, "-") for t in range(0, 76)]
    result = RunResult(
        samples, Arrivals(), 0, 0, 2, [0.01], 0, False, tmp_path,
        from_zero=[(2.0, 4.9), (40.0, None)],
    )  # fmt: skip
    text = summary(result, plan_load(settings), settings)
    assert "decided to start workers 0.01 s after new work was enqueued" in text
    assert "The first task then ran 2.90 s after that decision" in text
    assert result.first_task_delays() == pytest.approx([2.9])


@pytest.mark.integration
def test_the_probe_sees_a_task_start_and_a_task_shorter_than_a_poll(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    keys = Keys("taskscale")
    probe = TaskStarts(r, keys, "sleep", interval_s=0.01)
    probe.start()
    try:
        time.sleep(0.1)
        assert probe.starts == []  # nothing ran yet
        before = time.monotonic()
        r.hincrby(keys.active, "sleep", 1)  # a task running, as claim.lua counts it
        wait_until(lambda: len(probe.starts) == 1, timeout=5, what="the start seen")
        assert probe.starts[0] >= before
        time.sleep(0.1)
        assert len(probe.starts) == 1  # still the same run: no second start
        r.hincrby(keys.active, "sleep", -1)
        time.sleep(0.1)
        # done between two polls: only the completed counter moved
        pipe = r.pipeline()
        pipe.hincrby(keys.stats("sleep"), "completed", 1)
        pipe.execute()
        wait_until(lambda: len(probe.starts) == 2, timeout=5, what="the short task seen")
        r.hset(keys.active, "other", 3)  # another type's tasks are not ours
        time.sleep(0.1)
        assert len(probe.starts) == 2
    finally:
        probe.stop()
        r.close()
