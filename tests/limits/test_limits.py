"""Flow control in the scripts themselves: claim.lua never hands out more than a
type's rate or concurrency allows, keeps FIFO order, leaves other types alone,
and says when a held-back type gets its next token (docs/schema.md, "Limits")."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from support.scripts import W, heartbeat
from support.workers import run_taskscale
from taskscale.keys import Keys
from taskscale.limits import (
    TypeLimits,
    clear_limits,
    get_limits,
    parse_rate,
    set_limits,
)
from taskscale.luascripts import scripts_for
from taskscale.producer import Call, Producer

pytestmark = pytest.mark.integration


def claim(r: redis.Redis, keys: Keys, k: int, *types: str) -> tuple[str, list[dict[str, Any]]]:
    """(held header, claimed envelopes) of one claim as a worker makes it."""
    reply = scripts_for(r).claim(
        keys=[keys.active, keys.workers, keys.inflight(W), keys.limits],
        args=[keys.prefix, W, k, 0, *types],
        client=r,
    )
    assert reply[0] == b"ok", reply
    return reply[2].decode(), [json.loads(reply[i + 2]) for i in range(3, len(reply), 3)]


def complete(r: redis.Redis, keys: Keys, task: dict[str, Any]) -> None:
    """Record one task's success as a worker does (with the limits key)."""
    assert scripts_for(r).complete(
        keys=[keys.active, keys.idle_since, keys.inflight(W), keys.limits],
        args=[keys.prefix, 1, task["id"], task["type"], 5, "", 60, "null", ""],
        client=r,
    )


def test_parse_rate_reads_count_and_period() -> None:
    assert parse_rate("100/s") == (100, 1.0)
    assert parse_rate("10/min") == (10, 60.0)
    assert parse_rate("5/2s") == (5, 2.0)
    assert parse_rate("3/500ms") == (3, 0.5)
    for bad in ("", "100", "0/s", "1/0s", "x/s", "10/fortnight"):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_limits_round_trip_through_redis_and_clear(r: redis.Redis, keys: Keys) -> None:
    set_limits("mail", rate="100/s", concurrency=20, burst=5, client=r, keys=keys)
    set_limits("pdf", concurrency=3, client=r, keys=keys)
    got = get_limits(client=r, keys=keys)
    assert got["mail"] == TypeLimits("mail", 100, 1.0, 5, 20)
    assert got["pdf"] == TypeLimits("pdf", concurrency=3)
    assert json.loads(r.hget(keys.limits, "pdf") or b"") == {"concurrency": 3}
    assert clear_limits("pdf", client=r, keys=keys) is True
    assert clear_limits("pdf", client=r, keys=keys) is False
    assert set(get_limits(client=r, keys=keys)) == {"mail"}
    with pytest.raises(ValueError):
        set_limits("mail", client=r, keys=keys)
    with pytest.raises(ValueError):
        set_limits("mail", concurrency=0, client=r, keys=keys)


def test_concurrency_cap_bounds_claims_until_a_task_finishes(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    ids = producer.enqueue_many("a", [Call((i,)) for i in range(5)])
    set_limits("a", concurrency=2, client=r, keys=keys)
    held, got = claim(r, keys, 10, "a")
    assert [t["id"] for t in got] == ids[:2] and held == ""
    assert claim(r, keys, 10, "a")[1] == []
    # the three not taken are still queued, in order
    assert [json.loads(e)["id"] for e in r.lrange(keys.queue("a"), 0, -1)] == ids[2:]
    r.delete(keys.wake("a"))
    complete(r, keys, got[0])
    assert r.llen(keys.wake("a")) == 1  # a freed slot wakes an idle worker
    assert [t["id"] for t in claim(r, keys, 10, "a")[1]] == [ids[2]]
    assert int(r.hget(keys.active, "a") or 0) == 2


def test_rate_limit_takes_one_token_per_task_and_names_the_refill(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("a", [Call((i,)) for i in range(6)])
    set_limits("a", rate="4/s", burst=2, client=r, keys=keys)
    held, got = claim(r, keys, 10, "a")
    assert len(got) == 2  # a full bucket: the burst
    name, _, ms = held.partition("=")
    assert name == "a" and 1 <= int(ms) <= 250  # one token every 250 ms
    assert claim(r, keys, 10, "a")[1] == []
    time.sleep(0.27)
    assert len(claim(r, keys, 10, "a")[1]) == 1
    r.delete(keys.wake("a"))
    set_limits("a", rate="4/s", burst=2, client=r, keys=keys)  # a new limit: a full bucket
    assert r.llen(keys.wake("a")) == 1  # and the workers are told
    assert len(claim(r, keys, 10, "a")[1]) == 2


def test_a_limited_type_leaves_the_rest_of_the_claim_to_other_types(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    a_ids = producer.enqueue_many("a", [Call((i,)) for i in range(4)])
    b_ids = producer.enqueue_many("b", [Call((i,)) for i in range(4)])
    set_limits("a", concurrency=1, rate="1/min", client=r, keys=keys)
    held, got = claim(r, keys, 6, "a", "b")
    assert [t["id"] for t in got] == [a_ids[0], *b_ids]
    assert held.startswith("a=")
    assert [json.loads(e)["id"] for e in r.lrange(keys.queue("a"), 0, -1)] == a_ids[1:]


def test_an_unlimited_type_sees_no_held_types(
    r: redis.Redis, keys: Keys, producer: Producer
) -> None:
    heartbeat(r, keys)
    producer.enqueue_many("b", [Call((i,)) for i in range(3)])
    held, got = claim(r, keys, 2, "b")
    assert held == "" and len(got) == 2
    assert r.llen(keys.wake("b")) >= 1  # work left: chain-wake as before


def test_cli_limits_set_list_clear(redis_url: str, r: redis.Redis, keys: Keys) -> None:
    def cli(*argv: str) -> str:
        done = run_taskscale(redis_url, "limits", *argv, "--redis-url", redis_url, check=True)
        return done.stdout

    assert "rate 100/1s" in cli("set", "mail", "--rate", "100/s", "--concurrency", "20")
    r.hset(keys.active, "mail", 4)
    assert "mail: rate 100/1s (burst 1), concurrency 20; 4 running" in cli("list")
    assert json.loads(cli("list", "--json"))["mail"]["concurrency"] == 20
    assert "limits cleared" in cli("clear", "mail")
    assert "no limits set" in cli("list")


def test_status_shows_each_types_limits(r: redis.Redis, keys: Keys, producer: Producer) -> None:
    from taskscale.status import collect, render

    producer.enqueue("mail")
    set_limits("mail", rate="10/s", concurrency=3, client=r, keys=keys)
    set_limits("pdf", concurrency=2, client=r, keys=keys)  # nothing enqueued yet: still listed
    status = collect(r, keys)
    assert status["types"]["mail"]["limits"] == {
        "rate": 10,
        "period_s": 1.0,
        "burst": 1,
        "concurrency": 3,
    }
    assert status["types"]["pdf"]["limits"]["concurrency"] == 2
    lines = render(status).splitlines()
    assert lines[0].split()[-1] == "LIMITS"
    assert next(x for x in lines if x.startswith("mail")).endswith("10/1s max 3")
    assert next(x for x in lines if x.startswith("pdf")).endswith("max 2")


def test_controller_metrics_export_the_limits() -> None:
    from taskscale.controller.metrics import ControllerMetrics
    from taskscale.controller.types import Observation, TypeObservation

    metrics = ControllerMetrics()
    capped = TypeObservation("a", concurrency_limit=5, rate_limit_per_s=2.5)
    metrics.record_observation("ns/s", Observation(at=0.0, types={"a": capped}))
    labels = {"namespace": "ns", "name": "s", "type": "a"}
    assert metrics.sample("taskscale_observed_concurrency_limit_tasks", labels) == 5
    assert metrics.sample("taskscale_observed_rate_limit_tasks_per_second", labels) == 2.5
