"""Test helpers for the controller: Redis writes in the documented schema, an
in-memory actuator, TaskScaler objects as the parser reads them, and a count
of the round trips an observer makes.

The writes follow docs/schema.md's "plain commands" recipe, so these tests
do not depend on the runtime's producer or worker, only on the contract.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from taskscale.controller.reconciler import TargetNotFound
from taskscale.controller.types import Rollout
from taskscale.keys import DEFAULT_PRIORITY, Keys

#: The TaskScaler CRD, as deploy/ installs it.
CRD = Path(__file__).resolve().parents[2] / "deploy" / "crd" / "taskscaler.yaml"


def enqueue(r: redis.Redis, keys: Keys, task_type: str, count: int = 1) -> None:
    """Enqueue ``count`` tasks of ``task_type`` with plain commands, in one MULTI."""
    pipe = r.pipeline(transaction=True)
    queue = keys.queue(task_type, DEFAULT_PRIORITY)
    for _ in range(count):
        envelope = {"id": uuid.uuid4().hex, "type": task_type, "args": [], "kwargs": {}}
        pipe.rpush(queue, json.dumps(envelope))
    pipe.sadd(keys.types, task_type)
    pipe.hincrby(keys.queued, task_type, count)
    pipe.hincrby(keys.stats(task_type), "enqueued", count)
    pipe.rpush(keys.wake(task_type), 1)
    pipe.publish(keys.demand_channel, task_type)
    pipe.execute()


def push_ready(r: redis.Redis, keys: Keys, task_type: str, level: int, *envelopes: str) -> None:
    """RPUSH ``envelopes`` to a ready list and count them in QUEUED, in one
    MULTI, as the schema asks of a producer (docs/schema.md, "The ready count")."""
    pipe = r.pipeline(transaction=True)
    pipe.rpush(keys.queue(task_type, level), *envelopes)
    pipe.hincrby(keys.queued, task_type, len(envelopes))
    pipe.execute()


def start_tasks(r: redis.Redis, keys: Keys, task_type: str, count: int) -> None:
    """Move ``count`` queued tasks to running, as a claim would (counters only)."""
    queue = keys.queue(task_type, DEFAULT_PRIORITY)
    for _ in range(count):
        assert r.lpop(queue) is not None
    r.hincrby(keys.queued, task_type, -count)
    r.hincrby(keys.active, task_type, count)


def finish_tasks(r: redis.Redis, keys: Keys, task_type: str, count: int) -> None:
    """Finish ``count`` running tasks: ACTIVE_TASKS down, IDLE_SINCE = Redis now."""
    seconds, micros = r.time()
    r.hincrby(keys.active, task_type, -count)
    # truncated, not rounded: rounding up put IDLE_SINCE up to 0.5 ms after the
    # next observation's clock, so a 0 s idle threshold was not reached yet
    r.hset(keys.idle_since, task_type, f"{seconds}.{micros // 1000:03d}")


def register_worker(
    r: redis.Redis, keys: Keys, *, worker_id: str, pod: str, types: str, busy: int, threads: int = 4
) -> None:
    """A live worker registry record, as the heartbeat script writes it."""
    now_ms = int(time.time() * 1000)
    r.zadd(keys.workers, {worker_id: now_ms + 60_000})
    r.hset(
        keys.worker(worker_id),
        mapping={
            "id": worker_id,
            "pod": pod,
            "host": "test",
            "pid": 1,
            "types": types,
            "threads": threads,
            "busy": busy,
            "started_ms": now_ms,
            "heartbeat_ms": now_ms,
        },
    )
    r.expire(keys.worker(worker_id), 60)


@dataclass
class MemoryActuator:
    """An actuator over a number in memory; records every scale call."""

    replicas: int = 0
    missing: bool = False
    calls: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The target's rollout (None: none); ``rollout_reads`` counts the reads.
    rolling: Rollout | None = None
    rollout_reads: int = 0

    def current_replicas(self) -> int:
        with self.lock:
            if self.missing:
                raise TargetNotFound("deployment 'gone' not found")
            return self.replicas

    def scale(self, replicas: int, *, busy_by_pod: Mapping[str, int]) -> None:
        with self.lock:
            if self.missing:
                raise TargetNotFound("deployment 'gone' not found")
            self.calls.append((replicas, dict(busy_by_pod)))
            self.replicas = replicas

    def rollout(self) -> Rollout | None:
        with self.lock:
            self.rollout_reads += 1
            return self.rolling


def scaler_object(**spec: Any) -> dict[str, Any]:
    """A TaskScaler object (jobs/emails, generation 4) as the controller's
    parser receives it: a minimal valid spec, updated with ``spec``."""
    base: dict[str, Any] = {
        "scaleTargetRef": {"name": "email-worker"},
        "redis": {"url": "redis://redis:6379/0"},
        "taskTypes": [{"name": "email"}],
    }
    base.update(spec)
    return {
        "apiVersion": "taskscale.io/v1alpha1",
        "kind": "TaskScaler",
        "metadata": {"name": "emails", "namespace": "jobs", "generation": 4},
        "spec": base,
    }


class CountingConnection(redis.Connection):
    """A real connection that counts the requests it sends (one per round trip)."""

    sends = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sends += 1
        super().send_packed_command(command, check_health)


def evalsha_calls(client: redis.Redis) -> int:
    """How many EVALSHA the server has run (its command statistics)."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def redis_ms(r: redis.Redis) -> int:
    """Now on the Redis clock, unix ms."""
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000
