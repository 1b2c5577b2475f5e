"""The runtime benchmark's CPU mark waits for every worker process (issue 27):
the CPU per task is taken from the first poll at which each of the W worker
processes has finished a task, so a process still importing when the first
task ran does not add its start-up to the per-task figure."""

from __future__ import annotations

import threading
import time

import redis

from bench.peers.probe import PROBE_KEY_PREFIX, PROBES_KEY
from bench.runtime_probes import ProbeTotals, read_probes, wait_for_count


def stamp(r: redis.Redis, probe: str, count: int) -> None:
    r.sadd(PROBES_KEY, probe)
    now = time.time()
    r.hset(PROBE_KEY_PREFIX + probe, mapping={"count": count, "first": now, "last": now})


def test_the_first_mark_waits_until_every_worker_process_ran_a_task(r: redis.Redis) -> None:
    stamp(r, "a", 5)  # one process runs tasks...
    stamp(r, "b", 0)  # ...the other has not finished one yet (still importing)
    assert read_probes(r).processes == 1
    marks: list[ProbeTotals] = []

    def later() -> None:
        time.sleep(0.4)
        stamp(r, "b", 3)  # the late process's first task
        time.sleep(0.4)
        stamp(r, "a", 60)
        stamp(r, "b", 40)  # all done

    helper = threading.Thread(target=later)
    helper.start()
    try:
        done = wait_for_count(r, 100, timeout=10, procs=[], on_first=marks.append, processes=2)
    finally:
        helper.join()
    assert done.count == 100 and done.processes == 2
    assert len(marks) == 1
    assert marks[0].processes == 2 and marks[0].count == 8  # not the poll that saw only "a"


def test_one_process_is_marked_at_its_first_task(r: redis.Redis) -> None:
    stamp(r, "a", 5)
    marks: list[ProbeTotals] = []

    def later() -> None:
        time.sleep(0.3)
        stamp(r, "a", 10)

    helper = threading.Thread(target=later)
    helper.start()
    try:
        wait_for_count(r, 10, timeout=10, procs=[], on_first=marks.append)
    finally:
        helper.join()
    assert [m.count for m in marks] == [5]
