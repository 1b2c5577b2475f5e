"""A Redis outage shorter than the lease never costs a worker its lease: its
reconnect backoff is capped at a fraction of the lease
(``backoff.lease_cap``), so the heartbeat renews the lease soon after the
server is back (issue 21, case 9: a 5 s cap lost a 10 s lease in an 8 s
outage, and the task ran again)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from support.redis_server import RedisServer
from support.waiting import wait_until
from support.workers import NAMESPACE, processes, start_scheduler, start_worker, stop
from taskscale.backoff import lease_cap
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.worker.settings import WorkerSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEASE_S = 10.0
OUTAGE_S = LEASE_S - 2  # the figure: a lease less 2 s


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(data_dir=tmp_path) as started:  # restarted with its data
        yield started


def test_the_reconnect_cap_is_a_fraction_of_the_lease() -> None:
    assert WorkerSettings(types=("t",), lease_s=LEASE_S).reconnect_cap_s == 0.5
    assert lease_cap(5.0, 600.0) == 5.0 and lease_cap(5.0, 0.1) == 0.05


def test_a_worker_keeps_its_lease_through_an_outage_of_lease_less_2_s(
    server: RedisServer,
) -> None:
    keys = Keys(NAMESPACE)
    r = redis.Redis.from_url(server.url)
    Producer(r, keys=keys).enqueue("sleep", seconds=OUTAGE_S + 4)  # runs through the outage
    worker = start_worker(
        server.url,
        types="sleep",
        imports=["taskscale.examples"],
        threads=1,
        lease=LEASE_S,
        heartbeat=0.5,
    )
    with processes(worker):
        wait_until(lambda: int(r.hget(keys.active, "sleep") or 0) == 1, timeout=30)
        server.restart(down_s=OUTAGE_S)  # saved, stopped, started again with the data
        # a scheduler that reaps every 0.5 s: an expired lease is taken at once
        with processes(start_scheduler(server.url, lease=1.0)):
            wait_until(lambda: r.hget(keys.stats("sleep"), "completed") is not None, timeout=40)
            text = stop(worker)
    assert "lease lost" not in text, text
    assert int(r.hget(keys.stats("sleep"), "completed") or 0) == 1
    assert r.hget(keys.stats("sleep"), "requeued") is None  # the reaper never took it back
    assert r.llen(keys.queue("sleep")) == 0 and int(r.hget(keys.active, "sleep") or 0) == 0
