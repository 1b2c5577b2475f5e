"""The console over a sharded deployment: three namespaces on one real
redis-server, a real worker per namespace.  Every page and API read covers
all three, and every action lands in the namespace that holds its type (and
in no other)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from dashhelpers import EXAMPLES, TOKEN, dashboard_command, get, post

from support.waiting import wait_until
from support.workers import processes, start_worker
from taskscale.controller.config import RedisRef, ScalerConfig
from taskscale.controller.decision_log import DecisionLog
from taskscale.controller.outcome import PassOutcome
from taskscale.controller.types import Decision, ScalingPolicy, TypePolicy
from taskscale.dashboard.server import RunningDashboard, serve_in_thread
from taskscale.fanout import submit_fanout
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.shards import ShardMap

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NAMESPACES = "shard-0,shard-1,shard-2"
SHARDS = ShardMap.parse(NAMESPACES)
#: Where the example types live with this list (CRC-32 of the name mod 3).
HOME = {"sleep": "shard-0", "fail": "shard-1", "echo": "shard-2"}


def keys(task_type: str) -> Keys:
    return Keys(HOME[task_type])


def others(task_type: str) -> list[Keys]:
    return [Keys(ns) for ns in SHARDS.namespaces if ns != HOME[task_type]]


@contextmanager
def console(url: str) -> Iterator[RunningDashboard]:
    running = serve_in_thread(url, namespace=NAMESPACES, token=TOKEN)
    try:
        yield running
    finally:
        running.stop()


def workers(url: str) -> list[subprocess.Popen[bytes]]:
    """One worker per namespace, each serving the type that lives there."""
    return [
        start_worker(url, types=t, imports=EXAMPLES, env={"TASKSCALE_NAMESPACE": ns})
        for t, ns in HOME.items()
    ]


def queued_ids(r: redis.Redis, k: Keys, task_type: str, level: int = 5) -> list[str]:
    return [json.loads(e)["id"] for e in r.lrange(k.queue(task_type, level), 0, -1)]


def test_the_types_live_where_the_test_assumes() -> None:
    assert {t: SHARDS.namespace_for(t) for t in HOME} == HOME


def test_reads_cover_every_namespace(redis_url: str, r: redis.Redis) -> None:
    Producer(r, keys=keys("sleep")).enqueue("sleep", seconds=1, delay=600)
    Producer(r, keys=Keys("shard-2")).enqueue("nobody", priority=3)  # its home: not checked
    fanout = submit_fanout(r, "echo", [[1], [2]], limit=1, keys=keys("echo"))
    with processes(*workers(redis_url)), console(redis_url) as d:
        wait_until(lambda: len(get(d.url, "/api/workers")[1]["workers"]) == 3)
        wait_until(
            lambda: {"sleep", "fail", "echo"} <= get(d.url, "/api/catalog")[1]["types"].keys()
        )
        time.sleep(1.1)  # past the shared overview snapshot
        _, overview, _ = get(d.url, "/api/overview")
        _, catalog, _ = get(d.url, "/api/catalog")
        _, listed, _ = get(d.url, "/api/workers")
        _, fanouts, _ = get(d.url, "/api/fanouts")
        _, sleep, _ = get(d.url, "/api/types/sleep")
        _, status, _ = get(d.url, "/api/status")
        _, workers_page, _ = get(d.url, "/workers")
        _, fanouts_page, _ = get(d.url, "/fanouts")
    assert overview["namespaces"] == list(SHARDS.namespaces) == status["namespaces"]
    assert overview["types"]["sleep"]["delayed"] == 1
    assert overview["types"]["nobody"]["queued_by_priority"][3] == 1
    assert overview["types"]["echo"]["completed"] >= 1  # the fan-out's, run in shard-2
    assert overview["unserved"] == ["nobody"] == catalog["unserved"]
    assert {t: catalog["types"][t]["namespace"] for t in HOME} == HOME
    assert all(catalog["types"][t]["served"] for t in HOME)
    assert sorted((w["namespace"], w["types"]) for w in listed["workers"]) == [
        ("shard-0", ["sleep"]),
        ("shard-1", ["fail"]),
        ("shard-2", ["echo"]),
    ]
    assert not any(w["dead_unreaped"] for w in listed["workers"])
    [f] = fanouts["fanouts"]
    assert (f["id"], f["namespace"], f["total"]) == (fanout.id, "shard-2", 2)
    assert sleep["namespace"] == "shard-0" and sleep["state"]["delayed"] == 1
    assert len(sleep["workers"]) == 1
    assert "<th>namespace</th>" in workers_page and "<td>shard-1</td>" in workers_page
    assert "<td>shard-2</td>" in fanouts_page


def test_dead_letter_actions_go_to_the_namespace_of_the_type(
    redis_url: str, r: redis.Redis
) -> None:
    producer = Producer(r, keys=keys("fail"))
    ids = [producer.enqueue("fail", message=m, max_retries=0) for m in ("a", "b", "c")]
    with processes(*workers(redis_url)):
        wait_until(lambda: r.llen(keys("fail").dead("fail")) == 3)
    with console(redis_url) as d:
        _, listed, _ = get(d.url, "/api/dead/fail")
        assert sorted(x["id"] for x in listed["letters"]) == sorted(ids)
        assert listed["total"] == 3
        _, page, _ = get(d.url, "/dead/fail")
        assert all(f'data-id="{i}"' in page for i in ids)
        assert post(d.url, "/api/dead/fail/retry", {"ids": [ids[1]]}) == (200, {"done": 1})
        assert post(d.url, "/api/dead/fail/delete", {"ids": [ids[0]]}) == (200, {"done": 1})
        _, task, _ = get(d.url, f"/api/tasks/{ids[1]}")
    assert queued_ids(r, keys("fail"), "fail") == [ids[1]]
    assert r.llen(keys("fail").dead("fail")) == 1
    assert task["state"] == "queued" and task["type"] == "fail"
    for k in others("fail"):  # nothing written anywhere else
        assert r.llen(k.queue("fail", 5)) == r.llen(k.dead("fail")) == 0
        assert not r.exists(k.stats("fail"))


def test_enqueue_delayed_and_call_go_to_the_namespace_of_the_type(
    redis_url: str, r: redis.Redis
) -> None:
    with console(redis_url) as d:
        code, later = post(d.url, "/api/enqueue/sleep", {"kwargs": {"seconds": 1}, "delay": 600})
        assert code == 200
        assert r.zcard(keys("sleep").delayed("sleep")) == 1
        _, delayed, _ = get(d.url, "/api/delayed/sleep")
        assert [t["id"] for t in delayed["tasks"]] == [later["id"]]
        _, page, _ = get(d.url, "/delayed/sleep")
        assert f'data-id="{later["id"]}"' in page
        assert post(d.url, f"/api/delayed/sleep/{later['id']}/run") == (200, {"done": 1})
        assert queued_ids(r, keys("sleep"), "sleep") == [later["id"]]
        _, again = post(d.url, "/api/enqueue/sleep", {"delay": 600})
        assert post(d.url, f"/api/delayed/sleep/{again['id']}/delete") == (200, {"done": 1})
        assert r.zcard(keys("sleep").delayed("sleep")) == 0
        code, now = post(d.url, "/api/enqueue/echo", {"args": [1], "priority": 0})
        assert code == 200 and queued_ids(r, keys("echo"), "echo", 0) == [now["id"]]
        with processes(*workers(redis_url)):
            code, called = post(d.url, "/api/call/echo", {"args": [7]})
    assert code == 200 and called["ok"] is True and called["result"]["args"] == [7]
    for task_type in ("sleep", "echo"):
        for k in others(task_type):
            assert not r.exists(k.stats(task_type)) and r.zcard(k.delayed(task_type)) == 0
            assert all(r.llen(q) == 0 for q in k.queues(task_type))


def test_scalers_of_every_namespace_on_the_scaling_and_type_pages(
    redis_url: str, r: redis.Redis
) -> None:
    config = ScalerConfig(
        name="echoes",
        namespace="default",
        target="echo-worker",
        redis=RedisRef(url=redis_url, key_namespace=NAMESPACES),
        policy=ScalingPolicy(types=(TypePolicy("echo"),), max_replicas=4),
    )
    log = DecisionLog()
    log.bind(config, redis_url)
    decision = Decision(desired=2, reason_code="Demand", reason="0 -> 2: 2 queued")
    log.report(PassOutcome(config, time.time(), None, 0, decision, scaled=True))
    log.close()
    with console(redis_url) as d:
        _, scalers, _ = get(d.url, "/api/scalers")
        _, echo, _ = get(d.url, "/api/types/echo")  # echo lives in shard-2, the log in shard-0
    assert [s["scaler"] for s in scalers["scalers"]] == ["default/echoes"]
    assert [s["desired"] for s in echo["scalers"]] == [2]


def test_the_command_takes_a_namespace_list(redis_url: str, r: redis.Redis) -> None:
    Producer(r, keys=keys("fail")).enqueue("fail")
    Producer(r, keys=keys("echo")).enqueue("echo")
    env = {"TASKSCALE_NAMESPACE": NAMESPACES}
    with dashboard_command(redis_url, env=env, stderr=subprocess.STDOUT) as console:
        _, overview, _ = get(console.url, "/api/overview")
    assert overview["types"]["fail"]["queued"] == overview["types"]["echo"]["queued"] == 1
    assert f"namespaces {NAMESPACES}" in console.output
