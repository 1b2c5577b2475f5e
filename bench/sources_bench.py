"""What one ``sources.lua`` pass costs: 100 Celery types (10 lists each, 10
messages of 600 bytes per type) and kombu's ``unacked`` hash at several sizes.

    .venv/bin/python -m bench.sources_bench                  # 0, 1000, 10000, 50000
    .venv/bin/python -m bench.sources_bench --unacked 10000 --passes 50

One real redis-server on loopback (tests/support/redis_server.py).  Each unacked entry
is shaped like kombu's (JSON ``[message, exchange, routing key]``, about 700
bytes), spread evenly over the types' queues.  Prints the median and the
slowest of ``--passes`` observe calls (client side: the round trip and the
script; the script holds Redis for most of it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.redis_server import RedisServer
from taskscale.controller.observer import ObserveRequest
from taskscale.controller.sharded import observer_for
from taskscale.controller.source_spec import TypeSource
from taskscale.keys import CELERY_UNACKED

TYPES = [f"q{i}" for i in range(100)]


def fill(r: redis.Redis, unacked: int) -> None:
    pipe = r.pipeline(transaction=False)
    for t in TYPES:
        pipe.rpush(t, *["x" * 600] * 10)
    for n in range(unacked):
        queue = TYPES[n % len(TYPES)]
        message = {"body": "e" * 600, "headers": {"task": "app.t", "id": str(n)}}
        pipe.hset(CELERY_UNACKED, str(n), json.dumps([message, queue, queue]))
    pipe.execute()


def measure(unacked: int, passes: int) -> tuple[float, float]:
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        fill(r, unacked)
        sources = tuple(TypeSource(t, "celery", (t,), (t,)) for t in TYPES)
        request = {"s": ObserveRequest(types=tuple(TYPES), lead_s=30, sources=sources)}
        observer = observer_for(r, "taskscale")
        observer.observe(request)  # loads the script
        times = []
        for _ in range(passes):
            started = time.perf_counter()
            observer.observe(request)
            times.append(time.perf_counter() - started)
        r.close()
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unacked", type=int, action="append")
    parser.add_argument("--passes", type=int, default=30)
    args = parser.parse_args()
    for size in args.unacked or [0, 1000, 10_000, 50_000]:
        median, slowest = measure(size, args.passes)
        median_ms, slowest_ms = median * 1000, slowest * 1000
        print(f"unacked {size:>6}: median {median_ms:6.1f} ms, slowest {slowest_ms:6.1f} ms")


if __name__ == "__main__":
    main()
