"""The reporter's flushes while outcomes pour in (issue 27): at least
``FLUSH_GATHER_S`` (4 ms) apart, so one ``complete.lua`` call records every
outcome finished meanwhile; the first outcome after a quiet spell is
recorded at once, and nothing is lost or recorded twice."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
import redis

from taskscale.tasks import TaskRegistry
from taskscale.worker import reporter as reporter_module
from taskscale.worker.execution import Outcome
from taskscale.worker.gathering import FLUSH_GATHER_S, Gather
from taskscale.worker.reporter import STOP, Reporter
from taskscale.worker.runtime import Worker
from taskscale.worker.settings import WorkerSettings


def reporter_with_fake_record(r: redis.Redis) -> tuple[Reporter, list[tuple[float, list[str]]]]:
    registry = TaskRegistry()
    registry.register("noop", lambda: None)
    worker = Worker(r, WorkerSettings(types=("noop",), threads=2), registry=registry)
    reporter = worker._reporter
    flushes: list[tuple[float, list[str]]] = []

    def record(outcomes: list[Outcome]) -> None:  # counted, not sent
        flushes.append((time.monotonic(), [o.task_id for o in outcomes]))

    reporter.record = record  # type: ignore[method-assign]
    return reporter, flushes


def test_flushes_are_spaced_while_outcomes_pour_in(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert FLUSH_GATHER_S >= 0.004
    starts: list[float] = []  # when each flush began (the gather's clock)

    class TimedGather(Gather):
        def done(self, *, more: bool) -> None:
            super().done(more=more)
            starts.append(self._last)

    monkeypatch.setattr(reporter_module, "Gather", TimedGather)
    reporter, flushes = reporter_with_fake_record(r)
    thread = threading.Thread(target=reporter.run)
    thread.start()
    sent: list[str] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < 0.3:  # one outcome every ~0.2 ms, 0.3 s
            task_id = f"t{len(sent)}"
            reporter.outbox.put(Outcome(task_id, "noop", "ok", 0))
            sent.append(task_id)
            time.sleep(0.0002)
    finally:
        reporter.outbox.put(STOP)
        thread.join(5)
    elapsed = time.monotonic() - started
    recorded = [task_id for _, ids in flushes for task_id in ids]
    assert sorted(recorded) == sorted(sent)  # each once
    # at most one flush per FLUSH_GATHER_S (+ the first, at once, and STOP's)
    assert len(flushes) <= elapsed / FLUSH_GATHER_S + 2
    # Spaced as the flushes begin: when record() itself runs after that is
    # up to the scheduler on a loaded machine. The last flush is STOP's,
    # which does not wait.
    assert len(starts) == len(flushes)
    gaps = [b - a for a, b in itertools.pairwise(starts[:-1])]
    assert gaps and min(gaps) >= FLUSH_GATHER_S * 0.99


def test_a_lone_outcome_after_a_quiet_spell_is_recorded_at_once(r: redis.Redis) -> None:
    reporter, flushes = reporter_with_fake_record(r)
    thread = threading.Thread(target=reporter.run)
    thread.start()
    try:
        reporter.outbox.put(Outcome("first", "noop", "ok", 0))
        time.sleep(0.2)  # quiet: longer than the gather
        put_at = time.monotonic()
        reporter.outbox.put(Outcome("lone", "noop", "ok", 0))
        deadline = time.monotonic() + 2
        while len(flushes) < 2 and time.monotonic() < deadline:
            time.sleep(0.0005)
    finally:
        reporter.outbox.put(STOP)
        thread.join(5)
    assert [ids for _, ids in flushes[:2]] == [["first"], ["lone"]]
    assert flushes[1][0] - put_at < FLUSH_GATHER_S  # not held back a whole gather
