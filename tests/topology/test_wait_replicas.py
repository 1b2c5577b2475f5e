"""What the producer's WAIT option does, on a real Sentinel setup and a real
Cluster: while the master's replica cannot confirm (SIGSTOPped), an enqueue
with ``wait_replicas=1`` raises ``NotReplicated`` -- so the caller does not
count it as acknowledged -- although the task *is* in its queue; the same
enqueue without WAIT reports success; once the replica runs again, WAIT
confirms again.  (The failover test shows what an unconfirmed enqueue risks.)
"""

from __future__ import annotations

import json
import signal
import time

import pytest
import redis

from support.topologies import LOOPBACK, ClusterServers, SentinelServers
from taskscale.connection import connect
from taskscale.keys import DEFAULT_PRIORITY, Keys
from taskscale.producer import Producer, ProducerSettings
from taskscale.replication import NotReplicated

pytestmark = [pytest.mark.integration, pytest.mark.topology]


def replica_of(master: int) -> int:
    """The port of the one replica of the master on ``master``."""
    client = redis.Redis(host=LOOPBACK, port=master, socket_timeout=2)
    try:
        info = client.info("replication")
    finally:
        client.close()
    assert info["role"] == "master" and info["connected_slaves"] == 1, info
    return int(info["slave0"]["port"])


@pytest.mark.parametrize("topology", ["sentinel", "cluster"])
def test_wait_raises_not_replicated_while_the_replica_cannot_confirm(
    topology: str, request: pytest.FixtureRequest
) -> None:
    servers: SentinelServers | ClusterServers = request.getfixturevalue(
        "redis_sentinel" if topology == "sentinel" else "redis_cluster"
    )
    keys = Keys(f"wait-{topology}")
    client = connect(servers.url)
    queue = keys.queue("w", DEFAULT_PRIORITY)
    client.delete(queue)
    if isinstance(servers, ClusterServers):
        master = servers.master_port_of(keys.prefix)
    else:
        master = servers.current_master()
    replica = servers.processes[replica_of(master)]
    waiting = Producer(
        client, keys=keys, settings=ProducerSettings(wait_replicas=1, wait_timeout_s=0.3)
    )
    plain = Producer(client, keys=keys)
    acknowledged = [waiting.enqueue("w", 0)]  # the replica confirms

    replica.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(NotReplicated) as caught:
            acknowledged.append(waiting.enqueue("w", 1))
        acknowledged.append(plain.enqueue("w", 2))  # without WAIT: success, unconfirmed
    finally:
        replica.send_signal(signal.SIGCONT)

    assert (caught.value.confirmed, caught.value.wanted) == (0, 1)
    assert "a failover now could lose it" in str(caught.value)
    assert len(acknowledged) == 2  # the WAIT enqueue returned no id to count as acknowledged
    queued = [json.loads(e)["args"] for e in client.lrange(queue, 0, -1)]
    assert queued == [[0], [1], [2]]  # ...but its task was written (do not re-enqueue blindly)

    deadline = time.monotonic() + 20  # the replica catches up: WAIT confirms again
    while True:
        try:
            waiting.enqueue("w", 3)
            break
        except NotReplicated:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    client.delete(queue)
    client.close()
