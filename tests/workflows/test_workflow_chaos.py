"""Chaos: workflows (chains of 3, groups of 10, diamond DAGs) while worker
and scheduler processes are killed with SIGKILL every 2-3 s.  None is
stuck -- each ends succeeded with exactly the expected result, or
cancelled (one in ten is cancelled mid-run) -- and each step's dependants
are released once (the types' ``enqueued`` counters equal the steps
released), though a step may run twice.

``make test`` runs a bounded version (WFCHAOS_WORKFLOWS, default 30,
submitted at WFCHAOS_RATE per second, default 3, all ended within
WFCHAOS_DEADLINE_S, default 90 s: about 15 s); the documented run of 1,000
workflows is ``WFCHAOS_WORKFLOWS=1000 WFCHAOS_RATE=10 WFCHAOS_DEADLINE_S=900
pytest -s tests/workflows/test_workflow_chaos.py`` (docs/benchmarks.md)."""

from __future__ import annotations

import os
import random
import subprocess
import time
from typing import Any

import pytest
import redis

from support.workers import kill, processes, start, start_worker
from support.workflow_tasks import RUNS
from taskscale.keys import Keys
from taskscale.workflows import Workflow, chain, dag, group, read, step
from taskscale.workflows.state import WorkflowState, cancel

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = Keys("taskscale")
COUNT = int(os.environ.get("WFCHAOS_WORKFLOWS", "30"))
DEADLINE_S = float(os.environ.get("WFCHAOS_DEADLINE_S", "90"))
#: Workflows submitted per second (spread over the run, so kills land throughout).
RATE = float(os.environ.get("WFCHAOS_RATE", "3"))
TYPES = "wfc.inc,wfc.double,wfc.total"
WORKERS, SCHEDULERS = 3, 2


def shape(i: int) -> tuple[Workflow, Any, int]:
    """Workflow i, its expected result, its number of steps."""
    kind = i % 3
    if kind == 0:  # a chain of 3: i+3
        return chain(step("wfc.inc", i), "wfc.inc", "wfc.inc"), i + 3, 3
    if kind == 1:  # a group of 10 after a first step: ten times 2*(i+1)
        return chain(step("wfc.inc", i), group(*["wfc.double"] * 10)), [2 * (i + 1)] * 10, 11
    d = dag()  # a diamond: (i+1) -> (i+2), 2(i+1) -> sum
    top = d.add(step("wfc.inc", i))
    left = d.add("wfc.inc", after=[top])
    right = d.add("wfc.double", after=[top])
    d.add("wfc.total", after=[left, right])
    return d, (i + 2) + 2 * (i + 1), 4


def chaos_scheduler(url: str) -> subprocess.Popen[bytes]:
    argv = ["scheduler", "--lease", "1.5", "--max-sleep", "0.2", "--workflow-lost-after", "5"]
    return start(url, [*argv, "--log-level", "WARNING"])


def chaos_worker(url: str) -> subprocess.Popen[bytes]:
    return start_worker(
        url, types=TYPES, imports=["support.workflow_tasks"], threads=4, lease=1.5, heartbeat=0.3
    )


def test_no_workflow_is_stuck_and_no_step_is_released_twice(redis_url: str, r: redis.Redis) -> None:
    rng = random.Random(25)
    workers = [chaos_worker(redis_url) for _ in range(WORKERS)]
    schedulers = [chaos_scheduler(redis_url) for _ in range(SCHEDULERS)]
    expected: dict[str, Any] = {}
    cancelled: set[str] = set()
    steps = kills = 0
    with processes(*workers, *schedulers) as started:
        started_at = time.monotonic()
        next_kill = started_at + rng.uniform(2, 3)
        submitted = 0
        pending: set[str] = set()
        while time.monotonic() - started_at < DEADLINE_S:
            due = min(COUNT, int((time.monotonic() - started_at) * RATE) + 1)
            while submitted < due:
                wf, result, n = shape(submitted)
                wf_id = wf.enqueue(client=r, keys=KEYS)
                expected[wf_id], steps = result, steps + n
                pending.add(wf_id)
                if submitted % 10 == 9:
                    cancel(wf_id, "chaos: cancelled mid-run", client=r, keys=KEYS)
                    cancelled.add(wf_id)
                submitted += 1
            pending = {w for w in pending if not _done(r, w)}
            if submitted == COUNT and not pending:
                break
            if time.monotonic() >= next_kill:
                pool = started
                victim = rng.choice([p for p in pool if p.poll() is None])
                kill(victim)
                kills += 1
                is_worker = victim in workers
                fresh = chaos_worker(redis_url) if is_worker else chaos_scheduler(redis_url)
                (workers if is_worker else schedulers).append(fresh)
                started.append(fresh)
                next_kill = time.monotonic() + rng.uniform(2, 3)
            time.sleep(0.05)
        took = time.monotonic() - started_at

    states = {w: read(w, client=r, keys=KEYS) for w in expected}
    stuck = [w for w, s in states.items() if s is None or not s.done]
    assert stuck == [], f"{len(stuck)} of {COUNT} workflows not finished after {took:.0f}s"
    wrong = {
        w: (s.state, s.reason, s.result)
        for w, s in states.items()
        if s is not None and not _as_expected(w, s, expected[w], cancelled)
    }
    assert wrong == {}
    released = sum(int(r.hget(KEYS.stats(t), "enqueued") or 0) for t in TYPES.split(","))
    never = sum(
        1
        for s in states.values()
        if s is not None
        for st in s.steps
        if st.ready_ms is None  # cancelled before it was released
    )
    assert released == steps - never  # each step released once: its dependants start once
    runs = [int(v) for v in r.hgetall(RUNS).values()]
    print(  # the figures of the documented run (pytest -s)
        f"\nworkflow chaos: {COUNT} workflows, {steps} steps, {kills} kills in {took:.1f}s; "
        f"{len(cancelled)} cancelled; steps run twice or more: {sum(1 for n in runs if n > 1)}"
    )
    assert kills >= min(3, COUNT // 10)  # the bounded run too sees several kills


def _done(r: redis.Redis, wf_id: str) -> bool:
    return r.hget(KEYS.workflow(wf_id), "state") != b"running"


def _as_expected(wf_id: str, s: WorkflowState, want: Any, cancelled: set[str]) -> bool:
    if wf_id in cancelled:  # cancelled right after submit: it may still have finished first
        return s.state == "cancelled" or (s.state == "succeeded" and s.result == want)
    return s.state == "succeeded" and s.result == want
