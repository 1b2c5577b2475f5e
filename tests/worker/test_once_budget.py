"""``OnceBudget``, the claim budget of ``worker --once``: one task in all,
across the slot pools; a claim that got nothing opens it again; the worker
is done when its task's slot is free, or when the wait ends with no claim
under way -- and then no claim may start any more."""

from __future__ import annotations

from taskscale.worker.once import OnceBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_task_in_all_across_the_pools() -> None:
    budget = OnceBudget(60.0)
    assert budget.reserve("sync", 4) == 1  # one of four free slots
    assert budget.reserve("async", 100) == 0  # the other pool waits
    budget.settle("async", 1)  # not its reservation: ignored
    assert budget.claimed == 0
    budget.settle("sync", 1)
    assert budget.claimed == 1
    assert budget.reserve("sync", 4) == 0 and budget.reserve("async", 4) == 0


def test_a_claim_that_got_nothing_opens_the_budget_again() -> None:
    budget = OnceBudget(60.0)
    assert budget.reserve("sync", 1) == 1
    budget.settle("sync", 0)
    budget.settle("sync", 0)  # the claimer's release after the reply's settle: a no-op
    assert budget.reserve("async", 1) == 1
    assert budget.reserve("sync", 0) == 0  # no free slot, no reservation


def test_done_when_the_task_ran() -> None:
    budget = OnceBudget(60.0)
    budget.reserve("sync", 1)
    budget.settle("sync", 1)
    assert budget.why_done(busy=1) is None  # still running
    assert budget.why_done(busy=0) == "ran its one task"


def test_done_when_the_wait_ends_with_no_claim_under_way_and_then_closed() -> None:
    clock = Clock()
    budget = OnceBudget(5.0, clock=clock)
    assert budget.why_done(busy=0) is None
    clock.now += 6.0
    assert budget.reserve("sync", 1) == 1
    assert budget.why_done(busy=0) is None  # a claim is under way: wait for its answer
    budget.settle("sync", 0)
    assert budget.why_done(busy=0) == "no task came within --once-wait"
    assert budget.reserve("sync", 1) == 0  # closed: nothing claimed after the answer
