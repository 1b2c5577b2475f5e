"""The shard map: a type's namespace is CRC-32 of its name mod N, the same
in every process; the command line and TaskScaler take namespace lists."""

from __future__ import annotations

import zlib

import pytest

from taskscale.controller.config import InvalidSpec, config_from_spec
from taskscale.shards import ShardMap
from taskscale.status import merge_namespaces


def test_a_type_lives_where_crc32_of_its_name_says() -> None:
    shards = ShardMap.parse("a, b ,c")
    assert shards.namespaces == ("a", "b", "c")
    for name in ("email", "resize", "report-1"):
        assert shards.namespace_for(name) == "abc"[zlib.crc32(name.encode()) % 3]
    assert ShardMap.parse("only").namespace_for("email") == "only"


def test_group_and_the_one_namespace_rule_of_a_worker() -> None:
    shards = ShardMap(("n0", "n1", "n2"))
    groups = shards.group(["a", "b", "c", "d", "a"])
    assert sorted(t for ts in groups.values() for t in ts) == ["a", "b", "c", "d"]
    first = next(iter(groups))
    assert shards.only_namespace(groups[first]).namespace == first
    with pytest.raises(ValueError, match="run one worker per namespace"):
        shards.only_namespace(["a", "b", "c", "d"])


@pytest.mark.parametrize(("text", "problem"), [("a,,b", "invalid namespace"), ("a,a", "twice")])
def test_bad_namespace_lists_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ShardMap.parse(text)


def test_a_taskscaler_may_list_namespaces() -> None:
    spec = {
        "scaleTargetRef": {"name": "w"},
        "redis": {"url": "redis+cluster://10.0.0.1:7000", "namespace": "q-0,q-3"},
        "taskTypes": [{"name": "a"}],
    }
    assert config_from_spec(spec, name="s", namespace="ns").redis.key_namespace == "q-0,q-3"
    spec["redis"] = {"url": "redis+cluster://10.0.0.1:7000", "namespace": "q-0,{x}"}
    with pytest.raises(InvalidSpec, match="invalid namespace"):
        config_from_spec(spec, name="s", namespace="ns")


def test_what_each_namespace_holds_is_merged_and_a_type_found_twice_is_added_up() -> None:
    def part(queued: list[int], dead: int, worker: str) -> dict[str, object]:
        row = {
            "queued": sum(queued),
            "queued_by_priority": queued,
            "delayed": 1,
            "active": 0,
            "completed": 2,
            "failed": 0,
            "cancelled": 1,
            "dead": dead,
            "overdue": 0,
            "oldest_overdue_s": float(dead),
            "idle_since": 5.0,
        }
        return {
            "now": 10.0,
            "types": {"x": row, f"only-{worker}": dict(row)},
            "workers": [{"id": worker}],
            "schedulers": ["s"],
            "warnings": ["x: overdue"],
            "open_fanouts": dead,
        }

    merged = merge_namespaces([("a", part([1, 0, 2], 3, "w1")), ("b", part([0, 4, 0], 1, "w2"))])
    x = merged["types"]["x"]
    assert x["queued_by_priority"] == [1, 4, 2] and x["queued"] == 7
    assert (x["dead"], x["delayed"], x["completed"], x["cancelled"]) == (4, 2, 4, 2)
    assert x["oldest_overdue_s"] == 3.0  # the later of the two
    assert merged["open_fanouts"] == 4
    assert list(merged["types"]) == ["only-w1", "only-w2", "x"]
    assert merged["workers"] == [{"id": "w1", "namespace": "a"}, {"id": "w2", "namespace": "b"}]
    assert merged["schedulers"] == ["a/s", "b/s"] and merged["namespaces"] == ["a", "b"]
    assert merged["warnings"] == ["a: x: overdue", "b: x: overdue"]
