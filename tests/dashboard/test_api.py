"""The dashboard's JSON API against a real Redis and real workers: each
endpoint's data, the dead-letter and delayed-task operations (exactly what
they should move, counters checked), and the token rule: no token, no change."""

from __future__ import annotations

import json
import time

import pytest
import redis
from dashhelpers import EXAMPLES, KEYS, dashboard, get, make_dead_letters, post

from support.waiting import wait_until
from support.workers import processes, run_taskscale, start_worker
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.outcome import PassOutcome
from taskscale.controller.types import Decision, ScalingPolicy, TypePolicy
from taskscale.fanout import submit_fanout
from taskscale.producer import Producer

pytestmark = pytest.mark.integration


def stats(r: redis.Redis, task_type: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(KEYS.stats(task_type)).items()}


def test_status_is_the_same_data_as_taskscale_status_json(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    producer.enqueue("email", to="a")
    producer.enqueue("email", to="b", priority=0)
    with processes(start_worker(redis_url, types="sleep", imports=EXAMPLES)):
        wait_until(lambda: r.zcard(KEYS.workers) == 1)
        done = run_taskscale(redis_url, "status", "--json", check=True)
        with dashboard(redis_url) as d:
            code, api, _ = get(d.url, "/api/status")
    cli = json.loads(done.stdout)
    assert code == 200
    assert api["types"] == cli["types"]
    assert api["types"]["email"]["queued_by_priority"][0] == 1
    assert [w["id"] for w in api["workers"]] == [w["id"] for w in cli["workers"]]
    assert api["warnings"] == cli["warnings"] and api["schedulers"] == cli["schedulers"]


def test_overview_catalog_type_and_workers_endpoints(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    producer.enqueue("nobody", priority=2)
    producer.enqueue("nobody", priority=7)
    producer.enqueue("sleep", seconds=1, delay=30)
    with (
        processes(start_worker(redis_url, types="sleep,echo", imports=EXAMPLES, threads=3)),
        dashboard(redis_url) as d,
    ):
        wait_until(lambda: len(get(d.url, "/api/catalog")[1]["types"]) == 3)
        time.sleep(0.05)
        _, overview, _ = get(d.url, "/api/overview")
        _, catalog, _ = get(d.url, "/api/catalog")
        _, sleep, _ = get(d.url, "/api/types/sleep")
        _, workers, _ = get(d.url, "/api/workers")
        bad, error, _ = get(d.url, "/api/types/no%20spaces")
    nobody = overview["types"]["nobody"]
    assert nobody["queued"] == 2 and nobody["queued_by_priority"][2] == 1
    assert nobody["queued_by_priority"][7] == 1 and nobody["oldest_ready_s"] >= 0
    assert (
        overview["types"]["sleep"]["delayed"] == 1 and overview["types"]["sleep"]["due_soon"] == 1
    )
    assert overview["types"]["echo"]["queued"] == 0  # served, never enqueued: still listed
    assert overview["unserved"] == ["nobody"] == catalog["unserved"]
    assert sleep["catalog"]["params"][0]["name"] == "seconds"
    assert sleep["state"]["delayed"] == 1 and len(sleep["workers"]) == 1
    [worker] = workers["workers"]
    assert worker["threads"] == 3 and worker["dead_unreaped"] is False
    assert bad == 400 and "invalid task type" in error["error"]


def test_dead_letters_retry_one_retry_all_and_delete_move_exactly_what_they_should(
    redis_url: str, r: redis.Redis
) -> None:
    ids = make_dead_letters(redis_url, r, ["one", "two", "three", "four"])
    before = stats(r, "fail")
    with dashboard(redis_url) as d:
        code, listed, _ = get(d.url, "/api/dead/fail?count=2")
        assert code == 200 and listed["total"] == 4
        assert [x["id"] for x in listed["letters"]] == ids[:2]
        assert listed["letters"][0]["kwargs"] == {"message": "one"}
        assert "ExampleFailure" in listed["letters"][0]["error"]

        assert post(d.url, "/api/dead/fail/retry", {"ids": [ids[1]]}) == (200, {"done": 1})
        queued = [json.loads(e)["id"] for e in r.lrange(KEYS.queue("fail", 5), 0, -1)]
        assert queued == [ids[1]]
        assert r.llen(KEYS.dead("fail")) == 3
        assert stats(r, "fail")["dead_requeued"] == 1
        assert stats(r, "fail")["enqueued"] == before["enqueued"] + 1

        assert post(d.url, "/api/dead/fail/delete", {"ids": [ids[0]]}) == (200, {"done": 1})
        assert r.llen(KEYS.dead("fail")) == 2 and stats(r, "fail")["dead_purged"] == 1
        assert r.llen(KEYS.queue("fail", 5)) == 1

        assert post(d.url, "/api/dead/fail/retry", {"all": True}) == (200, {"done": 2})
        queued = [json.loads(e)["id"] for e in r.lrange(KEYS.queue("fail", 5), 0, -1)]
        assert queued == [ids[1], ids[2], ids[3]]
        assert r.llen(KEYS.dead("fail")) == 0 and stats(r, "fail")["dead_requeued"] == 3
        assert stats(r, "fail")["enqueued"] == before["enqueued"] + 3
        assert post(d.url, "/api/dead/fail/retry", {"ids": []})[0] == 400


def test_the_overview_counts_dead_letters_ever_made_beside_those_kept(
    redis_url: str, r: redis.Redis
) -> None:
    """``dead`` is the dead-letter list now; ``dead_lettered`` the counter the
    page's dead/s rate is taken from, which a retry or delete never lowers."""
    make_dead_letters(redis_url, r, ["one", "two", "three"])
    with dashboard(redis_url) as d:
        _, before, _ = get(d.url, "/api/overview")
        assert post(d.url, "/api/dead/fail/delete", {"all": True}) == (200, {"done": 3})
        _, after, _ = get(d.url, "/api/overview")  # a change forgets the shared snapshot
    assert (before["types"]["fail"]["dead"], before["types"]["fail"]["dead_lettered"]) == (3, 3)
    assert (after["types"]["fail"]["dead"], after["types"]["fail"]["dead_lettered"]) == (0, 3)


def test_a_state_change_without_the_right_token_is_refused_and_changes_nothing(
    redis_url: str, r: redis.Redis
) -> None:
    ids = make_dead_letters(redis_url, r, ["x", "y"])
    task = Producer(r, keys=KEYS).enqueue("sleep", delay=600)

    def snapshot() -> tuple[object, ...]:
        return (
            r.lrange(KEYS.dead("fail"), 0, -1),
            stats(r, "fail"),
            stats(r, "sleep"),
            r.zcard(KEYS.delayed("sleep")),
            [r.llen(q) for q in KEYS.queues("fail") + KEYS.queues("sleep")],
        )

    before = snapshot()
    attempts = [
        ("/api/dead/fail/retry", {"all": True}),
        ("/api/dead/fail/retry", {"ids": [ids[0]]}),
        ("/api/dead/fail/delete", {"all": True}),
        (f"/api/delayed/sleep/{task}/run", {}),
        (f"/api/delayed/sleep/{task}/delete", {}),
        ("/api/enqueue/sleep", {"kwargs": {"seconds": 1}}),
        ("/api/call/sleep", {"kwargs": {"seconds": 1}, "timeout": 1}),
    ]
    with dashboard(redis_url) as d:
        for path, doc in attempts:
            assert post(d.url, path, doc, token=None)[0] == 403, path
            assert post(d.url, path, doc, token="wrong")[0] == 403, path
        # a GET never changes anything: the write routes answer only POST
        assert get(d.url, "/api/dead/fail/retry")[0] == 405
    with dashboard(redis_url, token=None) as d:  # read-only: no token can unlock it
        for path, doc in attempts:
            assert post(d.url, path, doc, token="")[0] == 403, path
        assert "read-only" in post(d.url, attempts[0][0], attempts[0][1])[1]["error"]
    assert snapshot() == before


def test_delayed_run_now_and_delete_and_enqueue_with_priority_and_delay(
    redis_url: str, r: redis.Redis
) -> None:
    with dashboard(redis_url) as d:
        code, made = post(d.url, "/api/enqueue/sleep", {"kwargs": {"seconds": 2}, "delay": 300})
        assert code == 200
        code, urgent = post(d.url, "/api/enqueue/sleep", {"args": [1], "priority": 0})
        assert code == 200 and r.llen(KEYS.queue("sleep", 0)) == 1
        _, delayed, _ = get(d.url, "/api/delayed/sleep")
        assert [t["id"] for t in delayed["tasks"]] == [made["id"]]
        assert delayed["tasks"][0]["kwargs"] == {"seconds": 2}
        assert post(d.url, f"/api/delayed/sleep/{made['id']}/run") == (200, {"done": 1})
        assert r.zcard(KEYS.delayed("sleep")) == 0 and r.llen(KEYS.queue("sleep", 5)) == 1
        assert post(d.url, f"/api/delayed/sleep/{made['id']}/delete")[0] == 404
        _, again = post(d.url, "/api/enqueue/sleep", {"delay": 300})
        assert post(d.url, f"/api/delayed/sleep/{again['id']}/delete") == (200, {"done": 1})
        assert r.zcard(KEYS.delayed("sleep")) == 0
        assert post(d.url, "/api/enqueue/sleep", {"priority": 12})[0] == 400
        assert post(d.url, "/api/enqueue/sleep", {"args": "nope"})[0] == 400
        _, task, _ = get(d.url, f"/api/tasks/{urgent['id']}")
        assert task["state"] == "queued" and task["where"] == "0"


def test_call_returns_the_result_or_the_remote_error(redis_url: str, r: redis.Redis) -> None:
    with (
        processes(start_worker(redis_url, types="echo,fail", imports=EXAMPLES)),
        dashboard(redis_url) as d,
    ):
        code, ok = post(d.url, "/api/call/echo", {"args": [1], "kwargs": {"k": "v"}})
        _, failed = post(d.url, "/api/call/fail", {"kwargs": {"message": "boom"}})
        # retries kept (the task's own): the retry waits for a scheduler, none runs
        body = {"kwargs": {"message": "x"}, "retries": None, "timeout": 1}
        _, kept = post(d.url, "/api/call/fail", body)
    assert code == 200 and ok["ok"] is True
    assert kept["ok"] is False and kept["error"] == "no result within 1 s"
    assert ok["result"] == {"args": [1], "kwargs": {"k": "v"}}
    assert failed["ok"] is False and "boom" in failed["error"]


def test_fanouts_and_scalers_endpoints(redis_url: str, r: redis.Redis) -> None:
    handle = submit_fanout(r, "echo", [[1], [2], [3]], limit=1, keys=KEYS)
    log = DecisionLog()
    config = ScalerConfig(
        name="emails",
        namespace="default",
        target="email-worker",
        redis=RedisRef(url=redis_url),
        policy=ScalingPolicy(types=(TypePolicy("echo"),), max_replicas=4),
    )
    log.bind(config, redis_url)
    decision = Decision(desired=3, reason_code="Demand", reason="0 -> 3: 3 queued")
    log.report(PassOutcome(config, time.time(), None, 0, decision, scaled=True))
    log.close()
    with dashboard(redis_url) as d:
        _, fanouts, _ = get(d.url, "/api/fanouts")
        _, scalers, _ = get(d.url, "/api/scalers")
    [f] = fanouts["fanouts"]
    assert (f["id"], f["type"], f["total"], f["running"], f["pending"]) == (
        handle.id,
        "echo",
        3,
        1,
        2,
    )
    [s] = scalers["scalers"]
    assert (s["scaler"], s["current"], s["desired"]) == ("default/emails", 0, 3)
    assert [d["reason"] for d in s["decisions"]] == ["0 -> 3: 3 queued"]
