"""A Cluster master or the Sentinel master is killed (SIGKILL) while tasks
are enqueued, run by two workers and promoted by a scheduler.  They all ride
out the failover; the test counts acknowledged tasks that never ran (lost)
and tasks that ran twice, with and without the producer's WAIT option --
and with it on, nothing acknowledged may be lost, and the enqueues that
reach the new master (which has no replica left) are unconfirmed
(``NotReplicated``), never acknowledged.  Each run prints one
``FAILOVER {...}`` line with those counts (docs/redis.md quotes them);
test_wait_replicas.py shows WAIT refusing to confirm with the replica
stopped."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections import Counter

import pytest
import redis

from support.redis_server import RedisServer
from support.topologies import ClusterServers, SentinelServers, wait_for
from support.waiting import wait_until
from support.workers import taskscale_process
from taskscale.connection import RedisUnavailable, connect
from taskscale.keys import Keys
from taskscale.producer import Producer, ProducerSettings
from taskscale.replication import NotReplicated

pytestmark = [pytest.mark.integration, pytest.mark.topology, pytest.mark.slow]

KEYS = Keys("failover")
RATE = 150  # enqueues per second
BEFORE_KILL_S = 1.5
AFTER_FAILOVER_S = 4.0


def start(url: str, record_url: str, record_key: str, *argv: str) -> subprocess.Popen[bytes]:
    env = {"TASKSCALE_NAMESPACE": KEYS.namespace}
    env.update(TASKSCALE_TEST_RECORD_URL=record_url, TASKSCALE_TEST_RECORD_KEY=record_key)
    with open(os.environ.get("TASKSCALE_TEST_FAILOVER_LOG", os.devnull), "ab") as log:
        # the child keeps its own copy of the log
        return taskscale_process(url, *argv, "--log-level", "error", env=env, stderr=log)


@pytest.mark.parametrize("wait_replicas", [0, 1])
@pytest.mark.parametrize("topology", ["cluster", "sentinel"])
def test_failover_loses_nothing_acknowledged_with_wait(
    topology: str, wait_replicas: int, redis_server: RedisServer
) -> None:
    record_key = f"failover:{topology}:{wait_replicas}:{time.time_ns()}"
    record = redis.Redis.from_url(redis_server.url)
    servers = ClusterServers() if topology == "cluster" else SentinelServers()
    with servers:
        url = servers.url
        settings = ProducerSettings(
            retry_for_s=15.0, wait_replicas=wait_replicas, wait_timeout_s=0.5
        )
        producer = Producer(connect(url), keys=KEYS, settings=settings)
        procs = [
            start(
                url,
                redis_server.url,
                record_key,
                "worker",
                "--import",
                "failover_tasks",
                "--types",
                "fo",
                "--threads",
                "4",
                "--idle-wait",
                "0.5",
            )
            for _ in range(2)
        ]
        procs.append(start(url, redis_server.url, record_key, "scheduler"))
        acked: dict[int, float] = {}
        unconfirmed: list[int] = []
        refused: list[int] = []
        stop = threading.Event()

        def produce() -> None:
            n = 0
            deadline = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < deadline:
                delay = 0.3 if n % 10 == 0 else None  # some go through the scheduler
                try:
                    producer.enqueue("fo", n, delay=delay)
                    acked[n] = time.monotonic()
                except NotReplicated:
                    unconfirmed.append(n)
                except RedisUnavailable:
                    refused.append(n)
                n += 1
                time.sleep(1 / RATE)

        feeder = threading.Thread(target=produce, daemon=True)
        try:
            watch = connect(url)  # every process up before anything is killed
            wait_until(lambda: watch.zcard(KEYS.workers) == 2, timeout=30)
            wait_until(lambda: watch.zcard(KEYS.schedulers) == 1, timeout=30)
            feeder.start()
            time.sleep(BEFORE_KILL_S)
            killed = time.monotonic()
            if isinstance(servers, ClusterServers):
                victim = servers.master_port_of(KEYS.prefix)
                servers.kill(victim)
                wait_for(
                    lambda: servers.serving_master(KEYS.prefix) not in (None, victim),
                    "failover",
                    30,
                )
            else:
                victim = servers.current_master()
                servers.kill(victim)
                wait_for(lambda: servers.current_master() != victim, "failover", 30)
            failed_over = time.monotonic()  # when the test saw the new master
            time.sleep(AFTER_FAILOVER_S)
            stop.set()
            feeder.join(30)
            later = [n for n, t in acked.items() if t > failed_over] + unconfirmed
            first_after = [t - failed_over for t in acked.values() if t > failed_over]
            done = lambda: Counter(int(x) for x in record.lrange(record_key, 0, -1))  # noqa: E731
            with contextlib.suppress(AssertionError):  # some were lost: counted below
                wait_until(lambda: set(acked) <= set(done()), timeout=40, interval=0.25)
            alive = [p.poll() is None for p in procs]
        finally:
            stop.set()  # the feeder never outlives the test (it would raise into the next one)
            if feeder.is_alive():
                feeder.join(30)
            for p in procs:
                p.kill()
                p.wait(10)
    runs = done()
    lost = sorted(set(acked) - set(runs))
    twice = sorted(n for n, c in runs.items() if c > 1)
    result = {
        "topology": topology,
        "wait_replicas": wait_replicas,
        "acknowledged": len(acked),
        "unconfirmed": len(unconfirmed),
        "unconfirmed_lost": len(set(unconfirmed) - set(runs)),
        "refused": len(refused),
        "lost": len(lost),
        "ran_twice": len(twice),
        "ran_after_failover": len(set(later) & set(runs)),
        "kill_to_new_master_s": round(failed_over - killed, 2),
        "new_master_to_first_ack_s": round(min(first_after, default=-1.0), 2),
    }
    print("FAILOVER " + json.dumps(result))
    report = json.dumps(result)
    assert all(alive), f"a worker or the scheduler died in the failover: {report}"
    assert result["ran_after_failover"] > 0, report  # workers and the scheduler recovered
    if not wait_replicas:
        assert unconfirmed == [], report  # nothing to confirm without WAIT
        return
    assert lost == [], (
        f"acknowledged with WAIT and lost: {lost[:20]} "
        f"({len(unconfirmed)} enqueues unconfirmed, not counted as acknowledged): {report}"
    )
    # The new master has no replica left (its old master is dead), so every
    # enqueue that reached it raised NotReplicated: none was acknowledged.
    assert unconfirmed, f"no enqueue reached the new master unconfirmed: {report}"
    assert first_after == [], f"acknowledged with no replica to confirm: {report}"
