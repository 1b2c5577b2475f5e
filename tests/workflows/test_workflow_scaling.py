"""What the autoscaler sees of a workflow: its released steps counted as
queued tasks of their types like any other, and at every moment between
its submit and its end a task of it queued or running (a step waiting on a
parent is never alone: the parent is queued or in ACTIVE_TASKS), so the
idle rule never takes a running workflow for idle."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from support.scripts import W, claim, heartbeat
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.keys import Keys
from taskscale.luascripts import scripts_for
from taskscale.workflows import chain, group, read

pytestmark = pytest.mark.integration

KEYS = Keys("taskscale")
TYPES = ("a", "b", "c")


def seen(r: redis.Redis) -> dict[str, tuple[int, int]]:
    """(queued, active) of each type, as the controller observes them."""
    obs = Observer(r, KEYS).observe({"s": ObserveRequest(types=TYPES, lead_s=0)})["s"]
    return {t: (obs.types[t].queued, obs.types[t].active) for t in TYPES}


def finish(r: redis.Redis, task: dict[str, Any]) -> None:
    reply = '{"id":' + json.dumps(task["id"]) + ',"ok":true,"result":1}'
    scripts_for(r).complete(
        keys=[KEYS.active, KEYS.idle_since, KEYS.inflight(W)],
        args=[KEYS.prefix, 1, task["id"], task["type"], 5, "", 60, reply, ""],
        client=r,
    )


def test_ready_steps_are_queued_tasks_and_a_running_workflow_is_never_idle(
    r: redis.Redis,
) -> None:
    wf = chain("a", group("b", "b"), "c").enqueue(client=r, keys=KEYS)
    heartbeat(r, KEYS)
    views = [seen(r)]
    assert views[-1] == {"a": (1, 0), "b": (0, 0), "c": (0, 0)}
    (a,) = claim(r, KEYS, 1, "a")
    views.append(seen(r))
    assert views[-1] == {"a": (0, 1), "b": (0, 0), "c": (0, 0)}  # b, c wait on a running a
    finish(r, a)
    views.append(seen(r))
    assert views[-1] == {"a": (0, 0), "b": (2, 0), "c": (0, 0)}  # released with a's end
    b1, b2 = claim(r, KEYS, 2, "b")
    finish(r, b1)
    views.append(seen(r))
    assert views[-1] == {"a": (0, 0), "b": (0, 1), "c": (0, 0)}  # c waits on a running b
    finish(r, b2)
    views.append(seen(r))
    assert views[-1] == {"a": (0, 0), "b": (0, 0), "c": (1, 0)}
    (c,) = claim(r, KEYS, 1, "c")
    finish(r, c)
    assert all(sum(q + n for q, n in v.values()) >= 1 for v in views)
    assert seen(r) == {"a": (0, 0), "b": (0, 0), "c": (0, 0)}
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.state == "succeeded"
