"""observe.lua's due and upcoming delayed counts are exact for short and long
runs of due and upcoming tasks, and per look-ahead window when two scalers
read one type with different leads (a guard for any cheaper way of reading
the delayed set: issue 28 tried counting from the set's first 16 scores)."""

from __future__ import annotations

import pytest
import redis

from support.controller import redis_ms
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys

#: The head size issue 28 tried; the counts are checked around it.
HEAD = 16
LEAD_S = 60


@pytest.mark.parametrize("due", [0, 1, HEAD - 1, HEAD, HEAD + 1, 3 * HEAD])
@pytest.mark.parametrize("upcoming", [0, 1, HEAD - 1, HEAD, HEAD + 5])
def test_due_and_upcoming_are_exact_around_the_head(
    r: redis.Redis, keys: Keys, due: int, upcoming: int
) -> None:
    now = redis_ms(r)
    members = {f"due{i}": now - 10_000 - i for i in range(due)}
    members |= {f"soon{i}": now + 20_000 + i for i in range(upcoming)}
    members |= {f"later{i}": now + 600_000 + i for i in range(3)}  # beyond the lead
    r.zadd(keys.delayed("t"), members)

    seen = Observer(r, keys).observe({"s": ObserveRequest(("t",), lead_s=LEAD_S)})["s"]

    obs = seen.types["t"]
    assert (obs.due, obs.upcoming) == (due, upcoming)
    assert (obs.oldest_due_s is not None) == (due > 0)


def test_two_leads_on_one_type_each_count_their_window(r: redis.Redis, keys: Keys) -> None:
    now = redis_ms(r)
    r.zadd(keys.delayed("t"), {f"m{i}": now + 1_000 * (i + 5) for i in range(40)})

    seen = Observer(r, keys).observe(
        {
            "short": ObserveRequest(("t",), lead_s=10),  # m0..m5 (5..10 s)
            "long": ObserveRequest(("t",), lead_s=30),  # m0..m25 (past the head)
        }
    )

    assert seen["short"].types["t"].upcoming == 6
    assert seen["long"].types["t"].upcoming == 26
