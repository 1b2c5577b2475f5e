"""Each console reader is written once (taskscale/dashboard/data.py): it takes
the namespaces it reads -- one, or a sharded deployment's list -- and returns
one view.  With one namespace the view is exactly that namespace's read;
with several, what each holds merged (tests/dashboard/test_sharded.py runs
the console over three with real workers).  No other module of the console
reads Redis for a view, so no per-namespace copy of a reader can come back
beside it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import redis

from taskscale import status
from taskscale.catalog import read_catalog
from taskscale.dashboard import data
from taskscale.fanout import submit_fanout
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.shards import ShardMap

REPO = Path(__file__).resolve().parents[2]
READERS = (
    "status_of",
    "overview",
    "catalog",
    "scalers",
    "workers",
    "type_detail",
    "find_task",
    "dead_letters",
    "delayed_tasks",
    "fanouts",
    "workflows",
    "workflow",
)
#: What reads Redis for a console view: only data.py calls these.
RUNTIME_READS = {
    "collect",
    "collect_namespaces",
    "read_catalog",
    "read_scalers",
    "task_info",
    "dead_list",
    "delayed_list",
}


def test_every_reader_takes_the_namespaces_it_reads() -> None:
    public = {
        name
        for name, fn in vars(data).items()
        if inspect.isfunction(fn) and fn.__module__ == data.__name__ and not name.startswith("_")
    }
    assert public - {"empty_row"} == set(READERS)
    for name in READERS:
        params = list(inspect.signature(getattr(data, name)).parameters.values())
        assert [p.name for p in params[:2]] == ["client", "shards"], name
        assert params[1].annotation == "ShardMap", name  # never one namespace's Keys


def test_only_the_readers_module_reads_redis_for_a_view() -> None:
    offenders = []
    for path in sorted((REPO / "taskscale" / "dashboard").glob("*.py")):
        if path.name == "data.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            called = node.func if isinstance(node, ast.Call) else None
            name = called.attr if isinstance(called, ast.Attribute) else None
            name = called.id if isinstance(called, ast.Name) else name
            if name in RUNTIME_READS:
                offenders.append(f"{path.name}:{node.lineno} {name}")
    assert offenders == []


@pytest.mark.integration
def test_one_namespace_reads_as_itself_and_several_are_merged(r: redis.Redis) -> None:
    a, b = Keys("ns-a"), Keys("ns-b")
    Producer(r, keys=a).enqueue("mail")  # no worker serves it: a warning in ns-a
    Producer(r, keys=b).enqueue("mail", priority=0)  # the same type turns up in ns-b too
    Producer(r, keys=b).enqueue("report", delay=30)
    fanout = submit_fanout(r, "echo", [[1]], limit=1, keys=b)
    one, both = ShardMap(("ns-a",)), ShardMap(("ns-a", "ns-b"))

    alone = data.overview(r, one)
    assert "namespaces" not in alone and alone["warnings"][0].startswith("mail: 1 task(s)")
    assert alone["types"].keys() == status.collect(r, a)["types"].keys() == {"mail"}
    alone_catalog, plain = data.catalog(r, one), read_catalog(r, a)
    assert alone_catalog.keys() == plain.keys() and alone_catalog["now"] >= plain["now"] - 1
    assert (alone_catalog["types"], alone_catalog["unserved"]) == (plain["types"], ["mail"])
    assert data.fanouts(r, ShardMap(("ns-b",)))[0].keys() == {
        "id", "type", "total", "limit", "running", "succeeded", "failed", "pending", "done"
    }  # fmt: skip

    merged = data.overview(r, both)
    assert merged["namespaces"] == ["ns-a", "ns-b"]
    mail = merged["types"]["mail"]
    assert (mail["queued"], mail["queued_by_priority"][0], mail["queued_by_priority"][5]) == (
        2,
        1,
        1,
    )
    assert merged["types"]["report"]["due_soon"] == 1 and merged["types"]["report"]["delayed"] == 1
    assert any(w.startswith("ns-a: mail: ") for w in merged["warnings"])
    assert any(w.startswith("ns-b: mail: ") for w in merged["warnings"])
    catalog = data.catalog(r, both)
    assert catalog["unserved"] == ["echo", "mail", "report"]
    assert {n: t["namespace"] for n, t in catalog["types"].items()}["report"] == "ns-b"
    [listed] = data.fanouts(r, both)
    assert (listed["id"], listed["namespace"]) == (fanout.id, "ns-b")
