"""Child-process entry point: run one benchmark operation of one system.

``bench.runtime_bench`` runs in the project's venv and never imports a peer;
it runs ``python -m bench.peers.run PEER OP`` with the peer venv's Python,
one process per operation, so the six libraries' import-time side effects
(global brokers, app registries, event-loop policies) never meet. The child
prints one JSON object on its last stdout line.

    python -m bench.peers.run rq version
    python -m bench.peers.run rq enqueue --n 100000
    python -m bench.peers.run rq schedule --rate 1000 --seconds 10 --lead 5
    python -m bench.peers.run rq commands --workers 2 --threads 8 --bindir DIR

The Redis URL comes from ``BENCH_REDIS_URL``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from types import ModuleType
from typing import Any

from bench.peers import PEERS, VARIANT_ENV, VARIANTS, probe


def load(peer: str) -> ModuleType:
    if peer not in PEERS and peer not in VARIANTS:
        raise SystemExit(f"unknown peer {peer!r}; choose from {', '.join(PEERS)}")
    os.environ[VARIANT_ENV] = peer  # read when the module is imported
    return importlib.import_module(f"bench.peers.{VARIANTS.get(peer, peer)}")


def describe(module: ModuleType) -> dict[str, Any]:
    return {
        "version": module.version(),
        "enqueue_api": module.ENQUEUE_API,
        "worker_cli": module.WORKER_CLI,
        "delay_api": module.DELAY_API,
    }


def run_enqueue(module: ModuleType, url: str, n: int) -> dict[str, Any]:
    seconds = module.enqueue(url, n)
    return {"n": n, "seconds": seconds, "rate": n / seconds}


def run_schedule(
    module: ModuleType, url: str, *, rate: float, seconds: float, lead: float
) -> dict[str, Any]:
    """Schedule ``rate * seconds`` delayed tasks, due evenly from ``lead``
    seconds from now; report whether every one was enqueued before it was due
    (otherwise the lateness run is invalid, not merely slow)."""
    count = int(rate * seconds)
    first_due = time.time() + lead
    dues = [first_due + i / rate for i in range(count)]
    elapsed = module.schedule(url, dues)
    finished = time.time()
    return {
        "n": count,
        "first_due": first_due,
        "last_due": dues[-1],
        "seconds": elapsed,
        "finished": finished,
        "ahead_of_first_due": first_due - finished,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.run")
    parser.add_argument("peer", choices=(*PEERS, *VARIANTS))
    parser.add_argument("op", choices=("version", "enqueue", "schedule", "commands"))
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--lead", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--bindir", default=os.path.dirname(sys.executable))
    parser.add_argument("--delayed", action="store_true")
    args = parser.parse_args(argv)
    url = os.environ.get(probe.URL_ENV, "redis://127.0.0.1:6379/0")
    module = load(args.peer)
    if args.op == "version":
        result = describe(module)
        check = getattr(module, "unsupported", None)
        result["skip"] = check(args.bindir) if check is not None else ""
    elif args.op == "commands":
        commands = module.worker_commands(
            url=url,
            workers=args.workers,
            threads=args.threads,
            bindir=args.bindir,
            delayed=args.delayed,
        )
        result = {"commands": commands}
    elif args.op == "enqueue":
        result = run_enqueue(module, url, args.n)
    else:
        result = run_schedule(module, url, rate=args.rate, seconds=args.seconds, lead=args.lead)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
