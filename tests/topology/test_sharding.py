"""Task types spread over the three masters of a real cluster, one namespace
each: every task completes exactly once, and ``taskscale status --json`` and
the controller's observer add up every namespace."""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from typing import Any

import pytest
from shard_tasks import DONE, TYPES

from support.topologies import ClusterServers
from support.waiting import wait_until
from support.workers import taskscale_process
from taskscale.connection import connect
from taskscale.controller.observer import ObserveRequest
from taskscale.controller.sharded import ShardedObserver
from taskscale.controller.types import Observation
from taskscale.keys import Keys
from taskscale.shards import ShardedProducer, ShardMap, spread_namespaces

pytestmark = [pytest.mark.integration, pytest.mark.topology, pytest.mark.slow]

NOW_PER_TYPE = 20
LATER_PER_TYPE = 5


def taskscale(url: str, *argv: str, **popen: Any) -> subprocess.Popen[str]:
    return taskscale_process(url, *argv, env={"TASKSCALE_NAMESPACE": "unused"}, text=True, **popen)


def status(url: str, shards: ShardMap) -> dict[str, Any]:
    proc = taskscale(
        url, "status", "--json", "--namespace", ",".join(shards.namespaces), stdout=subprocess.PIPE
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    result: dict[str, Any] = json.loads(out)
    return result


def observe(observer: ShardedObserver) -> Observation:
    return observer.observe({"all": ObserveRequest(types=TYPES, lead_s=0)})["all"]


def test_types_over_three_masters_complete_once_and_every_reader_adds_up(
    redis_cluster: ClusterServers,
) -> None:
    url = redis_cluster.url
    client = connect(url)
    client.flushall()
    shards = ShardMap(spread_namespaces(client, "shardtest"))  # type: ignore[arg-type]
    masters = {redis_cluster.master_port_of(Keys(ns).prefix) for ns in shards.namespaces}
    assert len(masters) == 3  # one namespace per master
    groups = shards.group(TYPES)
    assert len(groups) == 3  # the test's types do land in all three

    producer = ShardedProducer(client, shards)
    for task_type in TYPES:
        producer.enqueue_many(task_type, [(n,) for n in range(NOW_PER_TYPE)])
        for n in range(NOW_PER_TYPE, NOW_PER_TYPE + LATER_PER_TYPE):
            producer.enqueue(task_type, n, delay=0.5 + n / 50)
    total = len(TYPES) * (NOW_PER_TYPE + LATER_PER_TYPE)

    observer = ShardedObserver(client, shards)
    before = observe(observer)
    assert sum(t.queued for t in before.types.values()) == len(TYPES) * NOW_PER_TYPE
    listed = status(url, shards)
    assert sorted(listed["types"]) == sorted(TYPES)
    assert sum(t["queued"] for t in listed["types"].values()) == len(TYPES) * NOW_PER_TYPE
    assert sum(t["delayed"] for t in listed["types"].values()) == len(TYPES) * LATER_PER_TYPE

    namespaces = ",".join(shards.namespaces)
    procs = [
        taskscale(
            url,
            "worker",
            "--namespace",
            namespaces,
            "--types",
            ",".join(types),
            "--import",
            "shard_tasks",
            "--threads",
            "4",
            "--idle-wait",
            "0.5",
            "--log-level",
            "warning",
        )
        for types in groups.values()
    ]
    procs.append(taskscale(url, "scheduler", "--namespace", namespaces, "--log-level", "warning"))
    try:
        wait_until(lambda: client.llen(DONE) >= total, timeout=60, interval=0.2)
        seen = wait_until(
            lambda: (o := observe(observer)).workers and len(o.workers) == 3 and o, timeout=20
        )
        listed = status(url, shards)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(30) for proc in procs]
    assert codes == [0] * len(procs)

    runs = Counter(x.decode() for x in client.lrange(DONE, 0, -1))
    expected = {f"{t}:{n}" for t in TYPES for n in range(NOW_PER_TYPE + LATER_PER_TYPE)}
    assert set(runs) == expected and set(runs.values()) == {1}  # each exactly once
    assert sum(t.completed_total for t in seen.types.values()) == total
    assert all(t.active == 0 and t.queued == 0 for t in seen.types.values())
    assert seen.schedulers_alive == 1  # one in every namespace (the fewest of any)
    assert {w.types for w in seen.workers} == {tuple(ts) for ts in groups.values()}
    assert sum(t["completed"] for t in listed["types"].values()) == total
    assert {t: v["completed"] for t, v in listed["types"].items()} == {
        t: NOW_PER_TYPE + LATER_PER_TYPE for t in TYPES
    }
    assert sorted(w["namespace"] for w in listed["workers"]) == sorted(groups)
    assert len(listed["schedulers"]) == 3 and listed["warnings"] == []
