"""The task catalog: live workers describe the types they serve, readers
merge the descriptions, a dead worker's types drop out, and a type enqueued
that no live worker serves is flagged (docs/schema.md, "The task catalog")."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import redis

import taskscale
from support.waiting import wait_until
from support.workers import kill, processes, run_taskscale, running_worker, start_worker, stop
from taskscale.catalog import CatalogPublisher, describe_task, read_catalog, signature_text
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.tasks import TaskRegistry

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")
EXAMPLES = "noop,sleep,echo,fail"


def cli(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_taskscale(url, *argv)


def catalog_json(url: str) -> dict[str, Any]:
    done = cli(url, "catalog", "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_a_worker_publishes_the_example_tasks_with_their_parameters(
    redis_url: str, r: redis.Redis
) -> None:
    with processes(start_worker(redis_url, types=EXAMPLES, imports=["taskscale.examples"])):
        wait_until(lambda: len(read_catalog(r, KEYS)["types"]) == 4)
        catalog = catalog_json(redis_url)
    sleep = catalog["types"]["sleep"]
    assert sleep["function"] == "taskscale.examples.sleep"
    assert sleep["params"] == [
        {"name": "seconds", "kind": "positional_or_keyword", "annotation": "float", "default": 1.0}
    ]
    assert sleep["returns"] == "float"
    assert sleep["doc"].startswith("Holds a thread for")
    assert sleep["version"] == taskscale.__version__
    assert len(sleep["workers"]) == 1 and sleep["served"] is True
    noop = catalog["types"]["noop"]
    assert [(p["name"], p["kind"]) for p in noop["params"]] == [
        ("args", "var_positional"),
        ("kwargs", "var_keyword"),
    ]
    assert catalog["types"]["fail"]["params"][0]["default"] == "failed on purpose"
    assert catalog["unserved"] == []


def test_a_type_enqueued_that_no_live_worker_serves_is_flagged(
    redis_url: str, r: redis.Redis
) -> None:
    Producer(r, keys=KEYS).enqueue("nobody.serves", kwargs={})
    # `taskscale worker` refuses a type with no function (tests/cli/test_worker_refuses.py);
    # a Worker built in-process with a registry lacking it still serves it
    with (
        processes(start_worker(redis_url, types="sleep", imports=["taskscale.examples"])),
        running_worker(redis_url, ("ghost",), registry=TaskRegistry()),
    ):
        wait_until(lambda: "sleep" in read_catalog(r, KEYS)["types"])
        wait_until(lambda: "ghost" in read_catalog(r, KEYS)["types"])
        Producer(r, keys=KEYS).enqueue("ghost")
        catalog = catalog_json(redis_url)
        text = cli(redis_url, "catalog").stdout
    assert catalog["unserved"] == ["ghost", "nobody.serves"]
    assert catalog["types"]["nobody.serves"]["workers"] == []
    # served by a live worker, but with no function behind the name
    assert catalog["types"]["ghost"]["registered"] is False
    assert len(catalog["types"]["ghost"]["workers"]) == 1
    assert catalog["types"]["sleep"]["served"] is True
    assert "WARNING: nobody.serves is enqueued and no live worker serves it" in text
    assert "WARNING: ghost is enqueued and no function registered" in text
    assert "sleep  taskscale.examples.sleep(seconds: float = 1.0) -> float" in text


def test_a_stopped_worker_drops_out_at_once_and_a_killed_one_within_its_lease(
    redis_url: str, r: redis.Redis
) -> None:
    graceful = start_worker(redis_url, types="sleep", imports=["taskscale.examples"])
    killed = start_worker(
        redis_url, types="echo", imports=["taskscale.examples"], lease=1.0, heartbeat=0.2
    )
    with processes(graceful, killed):
        wait_until(lambda: {"sleep", "echo"} <= read_catalog(r, KEYS)["types"].keys())
        stop(graceful)
        assert "sleep" not in read_catalog(r, KEYS)["types"]
        kill(killed)
        wait_until(lambda: "echo" not in read_catalog(r, KEYS)["types"], timeout=5)


def test_a_refresh_rewrites_an_entry_that_vanished(r: redis.Redis) -> None:
    registry = TaskRegistry()
    registry.register("double", lambda x: 2 * x)
    publisher = CatalogPublisher(r, KEYS, "w1", registry, ["double"], lease_s=5.0)
    r.zadd(KEYS.workers, {"w1": 10**13})
    publisher.publish()
    first = r.hget(KEYS.catalog("w1"), "doc")
    assert first is not None and 0 < r.pttl(KEYS.catalog("w1")) <= 5000
    r.delete(KEYS.catalog("w1"))  # e.g. expired while Redis was unreachable
    publisher.publish()
    assert r.hget(KEYS.catalog("w1"), "doc") == first
    assert read_catalog(r, KEYS)["types"]["double"]["workers"] == ["w1"]


def _kw(a: int, /, b: str = "x", *rest: float, flag: bool = False, when: object = None) -> None:
    """First paragraph
    spans two lines.

    Second paragraph."""


def test_describe_task_records_kinds_defaults_and_the_first_paragraph() -> None:
    entry = describe_task("kw", _kw)
    assert entry["doc"] == "First paragraph spans two lines."
    assert [p["kind"] for p in entry["params"]] == [
        "positional_only",
        "positional_or_keyword",
        "var_positional",
        "keyword_only",
        "keyword_only",
    ]
    assert entry["params"][3] == {
        "name": "flag",
        "kind": "keyword_only",
        "annotation": "bool",
        "default": False,
    }
    assert signature_text(entry) == (
        '(a: int, b: str = "x", *rest: float, flag: bool = false, when: object = null) -> None'
    )
    odd = describe_task("odd", lambda when=object: when)
    assert "default" not in odd["params"][0]
    assert odd["params"][0]["default_repr"] == "<class 'object'>"
    assert describe_task("missing", None) == {"type": "missing", "registered": False}
