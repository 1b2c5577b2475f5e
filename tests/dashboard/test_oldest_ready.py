"""How old the oldest ready task of a type is: one rule (scripts/lib/oldest_ready.lua),
read by the controller (observe.lua, its queue-wait target) and by the console
(console_overview.lua, the overview's ``oldest_ready_s``).  Both must give the
same answer for the same queues -- also where a second copy of the rule would
likely differ: a stamp in the future, a stamp written as a string, a head that
does not decode -- and neither may grow its own copy again."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import redis

from support.controller import push_ready
from taskscale.controller.observer import Observer, ObserveRequest
from taskscale.dashboard import data
from taskscale.keys import DEFAULT_PRIORITY, Keys
from taskscale.luascripts import script_source
from taskscale.shards import ShardMap

REPO = Path(__file__).resolve().parents[2]
KEYS = Keys("taskscale")
TYPES = ("email", "future", "promoted", "garbled", "unstamped", "later")


def redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def push(r: redis.Redis, task_type: str, level: int, envelope: object) -> None:
    raw = envelope if isinstance(envelope, str) else json.dumps(envelope)
    r.sadd(KEYS.types, task_type)
    push_ready(r, KEYS, task_type, level, raw)


def fill(r: redis.Redis) -> None:
    """Ready lists whose heads test each part of the rule."""
    now = redis_ms(r)
    # the longest-waiting head wins, whatever its level; a numeric string is a stamp
    push(r, "email", DEFAULT_PRIORITY, {"id": "a", "type": "email", "enqueued_ms": now - 30_000})
    push(r, "email", 0, {"id": "b", "type": "email", "enqueued_ms": str(now - 90_000)})
    push(r, "email", 0, {"id": "c", "type": "email", "enqueued_ms": now - 500_000})  # not a head
    # a stamp ahead of the Redis clock (another host's clock) waits 0 s, never less
    push(r, "future", DEFAULT_PRIORITY, {"id": "d", "type": "future", "enqueued_ms": now + 60_000})
    # a promoted task waits from its due time, not from its enqueue
    promoted = {"id": "e", "type": "promoted", "enqueued_ms": now - 900_000, "due_ms": now - 40_000}
    push(r, "promoted", 9, promoted)
    # a head that does not decode is left out; the other level's head counts
    push(r, "garbled", 0, "{not json")
    push(
        r, "garbled", DEFAULT_PRIORITY, {"id": "f", "type": "garbled", "enqueued_ms": now - 20_000}
    )
    # a head with neither stamp: no age at all
    push(r, "unstamped", DEFAULT_PRIORITY, {"id": "g", "type": "unstamped"})
    # nothing ready, only delayed: no age
    r.sadd(KEYS.types, "later")
    r.zadd(KEYS.delayed("later"), {json.dumps({"id": "h", "type": "later"}): now + 600_000})


#: Each type's oldest ready wait, seconds: (at least, below); None = none.
EXPECTED: dict[str, tuple[float, float] | None] = {
    "email": (90.0, 100.0),
    "future": (0.0, 0.0),
    "promoted": (40.0, 50.0),
    "garbled": (20.0, 30.0),
    "unstamped": None,
    "later": None,
}


def within(age: float | None, expected: tuple[float, float] | None) -> bool:
    if expected is None or age is None:
        return age is expected is None
    low, high = expected
    return low <= age <= high if low == high else low <= age < high


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["single", "cluster"], indirect=True)
def test_the_console_and_the_controller_read_the_same_oldest_ready_age(r: redis.Redis) -> None:
    fill(r)
    observed = Observer(r, KEYS).observe({"s": ObserveRequest(TYPES, 0)})["s"].types
    overview = data.overview(r, ShardMap((KEYS.namespace,)))["types"]
    controller = {t: observed[t].oldest_ready_s for t in TYPES}
    console = {t: overview[t]["oldest_ready_s"] for t in TYPES}
    assert {t: within(controller[t], EXPECTED[t]) for t in TYPES} == dict.fromkeys(TYPES, True), (
        controller
    )
    assert {t: within(console[t], EXPECTED[t]) for t in TYPES} == dict.fromkeys(TYPES, True), (
        console
    )
    for t in TYPES:  # read a moment apart: the same rule gives the same age to the second
        assert (console[t] is None) == (controller[t] is None), t
        assert console[t] is None or abs(console[t] - (controller[t] or 0.0)) < 1.0, t


def test_the_rule_is_written_once_in_lua() -> None:
    scripts = REPO / "taskscale" / "scripts"
    rule = (scripts / "lib" / "oldest_ready.lua").read_text()
    assert "local function oldest_ready_ms" in rule
    for reader in ("observe", "console_overview"):
        own = (scripts / f"{reader}.lua").read_text()
        assert "--! include lib/oldest_ready.lua" in own, reader
        # the stamps and the decoding of a head are the library's alone
        assert "enqueued_ms" not in own and "cjson.decode" not in own, reader
        assert "local function oldest_ready_ms" in script_source(reader), reader


def test_neither_the_console_nor_the_controller_reads_ready_heads_in_python() -> None:
    offenders = []
    for folder in ("dashboard", "controller"):
        for path in sorted((REPO / "taskscale" / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                stamp = isinstance(node, ast.Constant) and node.value == "enqueued_ms"
                head = isinstance(node, ast.Attribute) and node.attr == "lindex"
                if stamp or head:
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
