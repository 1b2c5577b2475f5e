"""The overview's delayed-task counts (issue 24, item 5): ``overdue`` and
``due_soon`` are settled from the earliest due time when it decides them
(no task in range, or the only task), else counted -- the same numbers
either way, at the edges of both windows."""

from __future__ import annotations

import time

import pytest
import redis

from taskscale import status
from taskscale.dashboard.overview_script import DUE_SOON_MS, read_overview
from taskscale.keys import Keys

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")
GRACE = status.OVERDUE_GRACE_MS

#: type -> due times relative to now (ms), and the (overdue, due soon) expected.
CASES: dict[str, tuple[list[int], tuple[int, int]]] = {
    "one-overdue": ([-20_000], (1, 0)),
    "one-in-grace": ([-GRACE // 4], (0, 1)),  # due, not yet overdue: due soon
    "one-soon": ([DUE_SOON_MS // 2], (0, 1)),
    "one-later": ([DUE_SOON_MS * 10], (0, 0)),
    "many-overdue": ([-30_000, -20_000], (2, 0)),
    "many-mixed": ([-20_000, DUE_SOON_MS // 2, DUE_SOON_MS * 10], (1, 1)),
    "many-soon": ([DUE_SOON_MS // 4, DUE_SOON_MS // 2, DUE_SOON_MS * 10], (0, 2)),
    "many-later": ([DUE_SOON_MS * 5, DUE_SOON_MS * 10], (0, 0)),
}


def test_overdue_and_due_soon_at_the_edges(r: redis.Redis) -> None:
    seconds, micros = r.time()
    now_ms = seconds * 1000 + micros // 1000
    for name, (dues, _) in CASES.items():
        r.sadd(KEYS.types, name)
        r.zadd(KEYS.delayed(name), {f"{name}-{i}": now_ms + d for i, d in enumerate(dues)})
    found = read_overview(r, KEYS)["types"]
    collected = status.collect(r, KEYS)["types"]
    for name, (dues, expected) in CASES.items():
        row = found[name]
        assert (row["overdue"], row["due_soon"]) == expected, name
        assert row["overdue"] == collected[name]["overdue"], name
        assert row["delayed"] == len(dues), name
        assert row["oldest_overdue_s"] == pytest.approx(max(0.0, -min(dues) / 1000), abs=2), name
    assert time.time() * 1000 - now_ms < GRACE // 4  # the in-grace case stayed in grace
