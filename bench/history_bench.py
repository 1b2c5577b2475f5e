"""What the history (issue 24) costs: the overview's rates read for many
types, and the reporter thread's work per recorded outcome.

    .venv/bin/python -m bench.history_bench              # 1000 types, 15 reads
    .venv/bin/python -m bench.history_bench --types 200

* ``rates``: :func:`taskscale.dashboard.history_data.rates` (what
  ``/api/overview`` adds) over N types, each with half of its last 7 buckets
  holding counts, samples and bins, on a ``redis-server`` started here:
  median and fastest wall time of 15 calls.
* ``reporter``: :meth:`taskscale.history.Batch.add` (and ``finished`` with a
  recent-runs cap of 100) for 200 000 outcomes in one thread: microseconds
  per outcome, loop included.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import redis

from taskscale import history
from taskscale.dashboard import history_data
from taskscale.keys import Keys
from taskscale.server_clock import server_time
from taskscale.shards import ShardMap

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.redis_server import RedisServer  # noqa: E402  (tests/ is not a package)


def rates_ms(r: redis.Redis, n_types: int, reads: int = 15) -> tuple[float, float]:
    keys = Keys("taskscale")
    bucket = history.current_bucket(server_time(r, keys).ms)
    pipe = r.pipeline(transaction=False)
    fields = {"c": 5, "f": 1, "s10": 5, "w3": 5, "q": 3, "r": 1}
    for t in range(n_types):
        name = f"type-{t}"
        pipe.sadd(keys.types, name)
        for i in range(history_data.RATE_BUCKETS):
            if (t + i) % 2 == 0:
                pipe.hset(keys.history(name, bucket - i), mapping=fields)
    pipe.execute()
    shards = ShardMap(("taskscale",))
    times = []
    for _ in range(reads):
        start = time.perf_counter()
        history_data.rates(r, shards)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def reporter_us(recent_cap: int, outcomes: int = 200_000) -> float:
    batch = history.Batch(recent_cap=recent_cap)
    run = ("0123456789abcdef0123456789abcdef", "completed", 3, 1764238312000, "null")
    start = time.perf_counter()
    for i in range(outcomes):
        batch.add("noop", "ok", i % 50, i % 300)
        if batch.recent_cap:
            batch.finished("noop", run)
    return (time.perf_counter() - start) / outcomes * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--types", type=int, default=1000)
    args = parser.parse_args(argv)
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        median, fastest = rates_ms(r, args.types)
    print(f"rates for {args.types} types: median {median:.1f} ms, fastest {fastest:.1f} ms")
    for cap in (0, 100):
        print(f"reporter, recent cap {cap}: {reporter_us(cap):.2f} us per outcome")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
