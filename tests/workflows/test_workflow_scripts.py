"""The workflow transitions driven script by script, no worker: the claim,
complete and fail scripts called the way the runtime calls them
(support.scripts), so each release, skip and end is seen exactly."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from support.scripts import W, claim, heartbeat
from taskscale.keys import Keys
from taskscale.luascripts import bound_script, scripts_for
from taskscale.options import TaskOptions
from taskscale.workflows import batch, chain, dag, group, read, step
from taskscale.workflows.state import cancel
from taskscale.workflows.sweep import sweep

KEYS = Keys("taskscale")


def done(r: redis.Redis, task: dict[str, Any], result: Any) -> int:
    """complete.lua for one claimed task, its result as the worker sends it."""
    reply = '{"id":' + json.dumps(task["id"]) + ',"ok":true,"result":' + json.dumps(result) + "}"
    args = [KEYS.prefix, 1, task["id"], task["type"], 5, "", 60, reply, ""]
    keys = [KEYS.active, KEYS.idle_since, KEYS.inflight(W), KEYS.limits]
    return int(scripts_for(r).complete(keys=keys, args=args, client=r))


def dead(r: redis.Redis, task: dict[str, Any], error: str = "boom") -> int:
    reply = json.dumps({"id": task["id"], "ok": False, "error_type": "ValueError", "error": error})
    args = [KEYS.prefix, task["id"], task["type"], 5, "dead", 0, "ValueError: " + error]
    args += ["", 60, reply, "", 0, ""]
    keys = [KEYS.active, KEYS.idle_since, KEYS.inflight(W), KEYS.limits]
    return int(scripts_for(r).fail(keys=keys, args=args, client=r))


def take(r: redis.Redis, *types: str, k: int = 50) -> list[dict[str, Any]]:
    heartbeat(r, KEYS)
    return claim(r, KEYS, k, *types)


def states(r: redis.Redis, wf: str) -> dict[str, str]:
    got = read(wf, client=r, keys=KEYS)
    assert got is not None
    return {s.id: s.state for s in got.steps}


def test_a_chain_passes_each_result_on_as_the_first_argument(r: redis.Redis) -> None:
    wf = chain(step("a", 1), step("b", "x"), step("c", k=2)).enqueue(client=r, keys=KEYS)
    (a,) = take(r, "a", "b", "c")
    assert a["args"] == [1] and a["workflow"] == wf and a["step"] == "s0"
    assert take(r, "b", "c") == []  # b waits on a
    done(r, a, {"n": 10})
    (b,) = take(r, "b", "c")
    assert b["args"] == [{"n": 10}, "x"]
    done(r, b, [1.5, None])
    (c,) = take(r, "c")
    assert c["args"] == [[1.5, None]] and c["kwargs"] == {"k": 2}
    done(r, c, 12345678901234567890)
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.state == "succeeded" and got.result == 12345678901234567890
    assert r.zscore(KEYS.workflows, wf) is None
    assert r.ttl(KEYS.workflow(wf)) > 0


def test_a_group_inside_a_chain_collects_results_in_order(r: redis.Redis) -> None:
    wf = chain("a", group("b", "c", "d"), "e").enqueue(client=r, keys=KEYS)
    (a,) = take(r, "a")
    done(r, a, 0)
    group_tasks = take(r, "b", "c", "d")
    assert sorted(t["type"] for t in group_tasks) == ["b", "c", "d"]
    assert all(t["args"] == [0] for t in group_tasks)
    for t in reversed(group_tasks):  # finish out of order
        assert take(r, "e") == []
        done(r, t, t["type"].upper())
    (e,) = take(r, "e")
    assert e["args"] == [["B", "C", "D"]]
    done(r, e, "ok")
    assert states(r, wf) == dict.fromkeys(["s0", "s1", "s2", "s3", "s4"], "succeeded")


def test_a_chain_inside_a_group_and_a_diamond_dag(r: redis.Redis) -> None:
    d = dag()
    top = d.add(step("top", 1))
    left = d.add(chain("l1", "l2"), after=[top])
    right = d.add("r", after=[top])
    d.add("bottom", after=[left, right])
    wf = d.enqueue(client=r, keys=KEYS)
    (t,) = take(r, "top")
    done(r, t, "T")
    firsts = take(r, "l1", "r")
    assert {x["type"]: x["args"] for x in firsts} == {"l1": ["T"], "r": ["T"]}
    for x in firsts:
        done(r, x, x["type"])
    (l2,) = take(r, "l2", "bottom")
    assert l2["args"] == ["l1"]
    done(r, l2, "L")
    (bottom,) = take(r, "bottom")
    assert bottom["args"] == [["L", "r"]]  # parents in the order the DAG lists them
    done(r, bottom, "B")
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.state == "succeeded" and got.result == "B"
    assert [s.label for s in got.steps] == ["n0", "", "", "n2", "n3"]


def test_a_step_finished_twice_releases_its_dependants_once(r: redis.Redis) -> None:
    wf = chain("a", group("b", "c")).enqueue(client=r, keys=KEYS)
    (a,) = take(r, "a")
    # the reaper returned it and another worker ran it too: two in-flight copies
    r.hset(KEYS.inflight("w2"), a["id"], json.dumps(a, separators=(",", ":")))
    done(r, a, 1)
    reply = '{"id":"' + a["id"] + '","ok":true,"result":2}'
    scripts_for(r).complete(
        keys=[KEYS.active, KEYS.idle_since, KEYS.inflight("w2"), KEYS.limits],
        args=[KEYS.prefix, 1, a["id"], "a", 5, "", 60, reply, ""],
        client=r,
    )
    assert r.llen(KEYS.queue("b")) == 1 and r.llen(KEYS.queue("c")) == 1
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.steps[0].result == 1 and got.finished == 1


def test_stop_policy_the_first_failure_fails_the_workflow_and_removes_queued_steps(
    r: redis.Redis,
) -> None:
    wf = chain("a", group("b", "c"), "d").enqueue(client=r, keys=KEYS)
    (a,) = take(r, "a")
    done(r, a, 1)
    (b,) = take(r, "b")  # b runs, c stays queued
    dead(r, b, "bad input")
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.state == "failed"
    assert got.reason == "step s1 (b) failed: ValueError: bad input"
    assert states(r, wf) == {
        "s0": "succeeded",
        "s1": "failed",
        "s2": "cancelled",
        "s3": "cancelled",
    }
    assert r.llen(KEYS.queue("c")) == 0 and take(r, "c", "d") == []


def test_stop_policy_flags_a_running_sibling_and_ignores_its_outcome(r: redis.Redis) -> None:
    wf = group("a", "b").enqueue(client=r, keys=KEYS)
    a, b = take(r, "a", "b")
    dead(r, a)
    assert r.exists(KEYS.cancel(b["id"]))  # current_task().cancelled in b's run
    done(r, b, "late")
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.state == "failed" and got.finished == 1


def test_continue_policy_skips_dependants_and_runs_the_rest(r: redis.Redis) -> None:
    wf = group(chain("a", "a2"), chain("b", "b2")).enqueue(policy="continue", client=r, keys=KEYS)
    a, b = take(r, "a", "b")
    dead(r, a)
    done(r, b, 1)
    (b2,) = take(r, "a2", "b2")
    assert b2["type"] == "b2"
    done(r, b2, 2)
    got = read(wf, client=r, keys=KEYS)
    assert got is not None
    assert {s.id: s.state for s in got.steps} == {
        "s0": "failed", "s1": "skipped", "s2": "succeeded", "s3": "succeeded"
    }  # fmt: skip
    assert got.state == "failed" and got.reason.startswith("step s0 (a) failed")


def test_a_batch_callback_runs_once_with_the_counts(r: redis.Redis) -> None:
    wf = batch("x", "x", chain("x", "y"), callback=step("cb", "tag")).enqueue(
        policy="continue", client=r, keys=KEYS
    )
    xs = take(r, "x")
    assert len(xs) == 3
    dead(r, xs[0])
    done(r, xs[1], 1)
    assert take(r, "cb") == []
    done(r, xs[2], 2)  # the chain's x: its y comes next
    (y,) = take(r, "y")
    dead(r, y)
    (cb,) = take(r, "cb")
    assert cb["args"] == [{"total": 3, "succeeded": 1, "failed": 2}, "tag"]
    done(r, cb, "reported")
    got = read(wf, client=r, keys=KEYS)
    assert got is not None and got.state == "succeeded" and got.result == "reported"


def test_a_group_limit_holds_steps_until_a_slot_frees(r: redis.Redis) -> None:
    wf = chain("a", group(*["g"] * 5, limit=2)).enqueue(client=r, keys=KEYS)
    (a,) = take(r, "a")
    done(r, a, 0)
    first = take(r, "g")
    assert len(first) == 2
    assert sorted(states(r, wf).values()).count("held") == 3
    done(r, first[0], 1)
    assert len(take(r, "g")) == 1  # one slot freed, one step released
    dead(r, first[1])  # stop policy: the held ones never start
    assert take(r, "g") == [] and states(r, wf)["s5"] == "cancelled"


def test_cancel_a_workflow_as_a_whole(r: redis.Redis) -> None:
    wf = chain(group("a", "b"), "c").enqueue(client=r, keys=KEYS)
    (a,) = take(r, "a", k=1)  # a runs, b is queued, c waits
    result = cancel(wf, client=r, keys=KEYS)
    assert (result.outcome, result.state) == ("ended", "cancelled")
    assert r.exists(KEYS.cancel(a["id"])) and r.llen(KEYS.queue("b")) == 0
    done(r, a, 1)
    assert take(r, "c") == []
    assert states(r, wf) == {"s0": "succeeded", "s1": "cancelled", "s2": "cancelled"}
    assert cancel(wf, client=r, keys=KEYS).outcome == "finished"
    assert cancel("nope", client=r, keys=KEYS).outcome == "unknown"


def test_step_options_reach_the_envelope(r: redis.Redis) -> None:
    chain(step("a", priority=1, options=TaskOptions(max_retries=0, timeout=2))).enqueue(
        client=r, keys=KEYS
    )
    (a,) = take(r, "a")
    assert (a["priority"], a["max_retries"], a["timeout_ms"]) == (1, 0, 2000)


@pytest.mark.parametrize(
    "defn",
    ["not json", json.dumps({"type": "a"}), json.dumps([1])],
)
def test_a_malformed_step_definition_is_refused_and_nothing_is_written(
    r: redis.Redis, defn: str
) -> None:
    with pytest.raises(redis.ResponseError, match="invalid workflow: step s0"):
        bound_script(r, "workflow_submit")(
            keys=[KEYS.workflows],
            args=[KEYS.prefix, "w1", "stop", 60, '["s0"]', "{}", "", "s0", defn],
            client=r,
        )
    assert r.keys("*") == []


def test_a_workflow_id_is_used_once(r: redis.Redis) -> None:
    chain("a").enqueue(workflow_id="same", client=r, keys=KEYS)
    with pytest.raises(redis.ResponseError, match="workflow same exists"):
        chain("a").enqueue(workflow_id="same", client=r, keys=KEYS)


def _submit_raw(r: redis.Redis, *pairs: str) -> Any:
    return bound_script(r, "workflow_submit")(
        keys=[KEYS.workflows],
        args=[KEYS.prefix, "w1", "stop", 60, '["b"]', "{}", "", *pairs],
        client=r,
    )


def _definition(parents: list[str], children: list[str] | None = None, sid: str = "x") -> str:
    pre = '{"id":"w1.' + sid + '","workflow":"w1","step":"' + sid + '","type":"t","args":['
    doc = {"type": "t", "task": f"w1.{sid}", "priority": 5, "pre": pre,
           "own": "", "post": "]}", "parents": parents}  # fmt: skip
    if children is not None:
        doc["children"] = children
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("pairs", "error"),
    [
        (
            ["a", _definition(["b"]), "b", _definition(["a"])],
            "waits on b, which is not a step listed",
        ),
        (["a", _definition(["a"])], "waits on a, which is not a step listed"),
        (["a", _definition([]), "a", _definition([])], "step id a is malformed or repeated"),
        (["a b", _definition([])], "step id a b is malformed"),
    ],
)
def test_a_cycle_a_repeated_or_malformed_step_id_is_refused(
    r: redis.Redis, pairs: list[str], error: str
) -> None:
    with pytest.raises(redis.ResponseError, match=error):
        _submit_raw(r, *pairs)
    assert r.keys("*") == []


def test_the_children_a_caller_gives_are_ignored_for_the_ones_the_parents_say(
    r: redis.Redis,
) -> None:
    _submit_raw(
        r,
        *("a", _definition([], children=["nope"], sid="a")),
        *("b", _definition(["a"], children=["a"], sid="b")),
    )
    (a,) = take(r, "t")
    done(r, a, 1)
    (b,) = take(r, "t")
    assert b["args"] == [1]
    done(r, b, 2)
    got = read("w1", client=r, keys=KEYS)
    assert got is not None and got.state == "succeeded" and got.result == 2


def test_a_corrupted_definition_never_fails_the_completion_of_a_step(r: redis.Redis) -> None:
    wf = chain("a", "b").enqueue(client=r, keys=KEYS)
    r.hset(KEYS.workflow_steps(wf), "s1", "not json")  # written by something else
    (a,) = take(r, "a")
    assert done(r, a, 1) == 1  # recorded: the worker's outcome is never lost
    assert int(r.hget(KEYS.active, "a") or 0) == 0
    assert take(r, "b") == []
    time.sleep(0.06)  # and the scheduler's sweep ends it, since nothing can move it on
    assert sweep(r, KEYS, lost_after_s=0.05).ended == [
        (wf, "no step is ready or running, and the workflow has not finished")
    ]
