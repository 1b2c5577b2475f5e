"""The one Lua loader (taskscale/luascripts.py) and the shared prelude
libraries every script inlines: the clock (lib/clock.lua) and the envelope
stamping (lib/stamp.lua).

Each test here would fail if a second way of loading scripts, a second
clock read or a second stamping copy came back, or if the one of each
stopped doing what the scripts relied on.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from taskscale.controller.observer import Observer
from taskscale.controller.sources import SourceReader
from taskscale.keys import Keys
from taskscale.luascripts import (
    SCRIPT_NAMES,
    bound_script,
    expand_includes,
    script_source,
    scripts_for,
)
from taskscale.server_clock import server_time
from taskscale.tracking import Tracker

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "taskscale" / "scripts"
NAMES = sorted(p.stem for p in SCRIPTS.glob("*.lua"))
LIBS = sorted(p.name for p in (SCRIPTS / "lib").glob("*.lua"))
BOTH = pytest.mark.parametrize(
    "backend", ["single", pytest.param("cluster", marks=pytest.mark.topology)], indirect=True
)

_TIME = re.compile(r"""redis\.p?call\(\s*['"]time['"]""", re.IGNORECASE)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- the loader ------------------------------------------------------------------


def test_every_script_loads_on_a_real_server_under_the_sha_its_object_calls(
    r: redis.Redis,
) -> None:
    for name in NAMES:
        sha = r.script_load(script_source(name))  # compiles it: a syntax error fails here
        assert bound_script(r, name).sha == sha, name
        assert "--! include" not in script_source(name), name


def test_a_client_gets_each_script_once_from_every_caller(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    registered: Counter[str] = Counter()
    by_text = {script_source(name): name for name in NAMES}
    original = r.register_script

    def counting(script: Any) -> Any:
        registered[by_text[script]] += 1
        return original(script)

    monkeypatch.setattr(r, "register_script", counting)
    keys = Keys("loader")
    for _ in range(2):
        scripts_for(r)
        for name in NAMES:
            bound_script(r, name)
        Tracker(r, keys=keys).close()
        Observer(r, keys)
        SourceReader(r, keys)
        server_time(r, keys)
    assert registered == Counter(NAMES)
    runtime = scripts_for(r)
    assert all(getattr(runtime, name) is bound_script(r, name) for name in SCRIPT_NAMES)
    other = redis.Redis(connection_pool=r.connection_pool)
    assert bound_script(other, "claim") is not bound_script(r, "claim")  # per client


def test_a_script_flushed_from_redis_is_loaded_again_on_its_next_call(r: redis.Redis) -> None:
    keys = Keys("loader")
    server_time(r, keys)
    r.script_flush()
    assert server_time(r, keys).seconds > 0  # NOSCRIPT -> SCRIPT LOAD -> EVALSHA


def test_only_luascripts_registers_or_evaluates_script_text() -> None:
    calls = re.compile(
        r"\.(register_script|eval|evalsha|eval_ro|evalsha_ro|script_load|fcall)\("
        r"|\bscript_source\(|redis\.p?call\("
    )
    found = []
    for path in sorted((REPO / "taskscale").rglob("*.py")):
        if path.name == "luascripts.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if calls.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []


def test_a_library_is_inlined_once_per_script_and_every_library_is_used() -> None:
    # cancel.lua includes lib/ready.lua, and lib/fanout_final.lua, which
    # includes lib/clock.lua, lib/stamp.lua and lib/fanout_done.lua (which
    # includes lib/clock.lua again)
    cancel = script_source("cancel")
    assert cancel.count("local function stamp_json") == 1
    assert cancel.count("local function fanout_done") == 1
    assert len(_TIME.findall(cancel)) == 1
    assert "-- (lib/clock.lua: inlined above)" in cancel
    used = {lib for name in NAMES for lib in LIBS if f"lib/{lib}" in _all_includes(name)}
    assert used == set(LIBS)


def own_text(path: Path) -> str:
    """A script file without its inline copies of libraries (a standalone
    script's copies are held equal to the libraries by test_lua_standalone)."""
    return re.sub(r"^--! inline .*?^--! end inline$", "", path.read_text(), flags=re.M | re.S)


def _all_includes(name: str) -> set[str]:
    seen: set[str] = set()
    todo = [(SCRIPTS / f"{name}.lua").read_text()]
    while todo:
        for lib in re.findall(r"^--! (?:include|inline) (lib/\w+\.lua)", todo.pop(), re.M):
            if lib not in seen:
                seen.add(lib)
                todo.append((SCRIPTS / lib).read_text())
    return seen


# --- the clock -----------------------------------------------------------------


def test_no_script_reads_the_clock_but_through_lib_clock() -> None:
    for path in [*SCRIPTS.glob("*.lua"), *SCRIPTS.glob("lib/*.lua")]:
        if path.name != "clock.lua":
            assert not _TIME.search(own_text(path)), f"{path.name} reads TIME itself"
    prelude = re.sub(r"--[^\n]*", "", (SCRIPTS / "lib" / "clock.lua").read_text().rstrip("\n"))
    for name in NAMES:
        reads = len(_TIME.findall(script_source(name)))
        assert reads <= 1, f"{name} reads the clock {reads} times"
        # a script reads the clock if and only if it uses it
        used = re.search(
            r"\b(now|now_exact|clock|seconds_text)\b", _code(name).replace(prelude, "")
        )
        assert bool(reads) == bool(used), name


def _code(name: str) -> str:
    """The script's expanded text without comments."""
    return re.sub(r"--[^\n]*", "", script_source(name))


def test_the_clock_prelude_names_the_server_time_in_every_shape(r: redis.Redis) -> None:
    script = expand_includes(
        "--! include lib/clock.lua\n"
        "return {clock[1], clock[2], now, string.format('%.3f', now_exact), seconds_text(now),"
        " seconds_text(1700000000005), seconds_text(1700000000999)}"
    )
    before = r.time()
    seconds, micros, now, exact, idle, five, late = (text(v) for v in r.eval(script, 0))
    after = r.time()
    s, us = int(seconds), int(micros)
    assert tuple(before) <= (s, us) <= tuple(after)
    assert int(now) == s * 1000 + us // 1000
    assert exact == f"{s * 1000 + us // 1000}.{us % 1000:03d}"
    assert idle == f"{s}.{(us // 1000):03d}"
    assert (five, late) == ("1700000000.005", "1700000000.999")


@BOTH
def test_python_reads_the_clock_of_the_namespaces_server(r: redis.Redis) -> None:
    keys = Keys("clock")
    node = r.get_node_from_key(keys.types) if hasattr(r, "get_node_from_key") else None
    direct = r.time(target_nodes=node) if node else r.time()  # type: ignore[call-arg]
    got = server_time(r, keys)
    assert (got.seconds, got.micros) >= tuple(int(x) for x in direct)
    assert got.ms == got.seconds * 1000 + got.micros // 1000
    assert got.unix_s == pytest.approx(got.seconds + got.micros / 1e6)
    assert abs(got.ms - int(direct[0]) * 1000) < 5_000


# --- the stamping ---------------------------------------------------------------


def test_no_script_stamps_an_envelope_but_through_lib_stamp() -> None:
    copies = re.compile(
        r"~=\s*'}'|local function stamp|\.\.\s*string\.sub\(\s*\w+\s*,\s*2\s*\)"
        r"""|'\{"enqueued_ms":'"""
    )
    for path in [*SCRIPTS.glob("*.lua"), *SCRIPTS.glob("lib/*.lua")]:
        if path.name != "stamp.lua":
            assert not copies.search(own_text(path)), f"{path.name} stamps by itself"


STAMP = "--! include lib/stamp.lua\nreturn {stamp_json(ARGV[1], ARGV[2], ARGV[3]), stamp_first(ARGV[1], ARGV[2], ARGV[3])}"  # noqa: E501


@pytest.mark.parametrize(
    ("env", "appended", "first"),
    [
        (
            '{"id":"a","args":[],"kwargs":{}}',
            '{"id":"a","args":[],"kwargs":{},"due_ms":7}',
            '{"due_ms":7,"id":"a","args":[],"kwargs":{}}',
        ),
        # what follows the object is dropped (the member goes inside it)
        ('{"id":"a"}\n ', '{"id":"a","due_ms":7}', '{"due_ms":7,"id":"a"}\n '),
        # not an object: appending leaves it (the claim script dead-letters it)
        ("not json", "not json", None),
        ('"text"', '"text"', None),
    ],
)
def test_stamping_cuts_and_joins_the_text_never_re_encoding(
    r: redis.Redis, env: str, appended: str, first: str | None
) -> None:
    got_appended, got_first = (
        text(v) for v in r.eval(expand_includes(STAMP), 0, env, "due_ms", "7")
    )
    assert got_appended == appended
    if first is not None:
        assert got_first == first


def test_an_appended_stamp_wins_over_a_stale_one_and_a_first_one_yields(r: redis.Redis) -> None:
    appended, _ = (
        text(v) for v in r.eval(expand_includes(STAMP), 0, '{"due_ms":1}', "due_ms", "2")
    )
    assert json.loads(appended)["due_ms"] == 2
    _, first = (text(v) for v in r.eval(expand_includes(STAMP), 0, '{"x":1,"n":9}', "n", "3"))
    assert json.loads(first)["n"] == 9


def test_enqueue_appends_enqueued_ms_to_the_exact_text_given(r: redis.Redis) -> None:
    keys = Keys("stamps")
    raw = '{"id":"a1","type":"t","args":[],"kwargs":{},"enqueued_ms":1}'
    before = int(r.time()[0]) * 1000
    for delay in (0, 60_000):
        reply = scripts_for(r).enqueue(
            keys=[keys.types], args=[keys.prefix, "t", delay, 0, raw], client=r
        )
        assert [int(x) for x in reply] == [1]
    after = int(r.time()[0]) * 1000 + 1000
    ready = text(r.lindex(keys.queue("t"), 0))
    delayed = text(r.zrange(keys.delayed("t"), 0, 0)[0])
    for stored in (ready, delayed):
        head, ms = stored.rsplit(',"enqueued_ms":', 1)
        assert head == raw[:-1] and ms.endswith("}")
        assert before <= int(ms[:-1]) <= after
        assert json.loads(stored)["args"] == []  # never re-encoded ([] stays [])


def test_promote_appends_due_ms_and_leaves_a_member_that_is_no_object(r: redis.Redis) -> None:
    keys = Keys("stamps")
    raw = '{"id":"p1","type":"t","args":[],"priority":2}'
    r.sadd(keys.types, "t")
    r.zadd(keys.delayed("t"), {raw: 1000, "garbage": 1001})
    promoted = scripts_for(r).promote(keys=[keys.types], args=[keys.prefix, 1000], client=r)
    assert int(promoted[0]) == 2
    assert text(r.lindex(keys.queue("t", 2), 0)) == raw[:-1] + ',"due_ms":1000}'
    assert text(r.lindex(keys.queue("t"), 0)) == "garbage"


def test_fan_out_sub_tasks_get_their_stamps_first(r: redis.Redis) -> None:
    keys = Keys("stamps")
    bound_script(r, "fanout_open")(
        keys=[keys.fanout("F"), keys.fanouts_open], args=["F", "t", 5, 1, 60, 1000, 60], client=r
    )
    sub = '{"id":"s","type":"t","fanout":"F"}'
    bound_script(r, "fanout_add")(
        keys=[
            keys.fanout("F"),
            keys.fanout_pending("F"),
            keys.queue("t"),
            keys.types,
            keys.stats("t"),
            keys.wake("t"),
            keys.fanout_results("F"),
            keys.fanouts_open,
        ],
        args=[keys.prefix, 64, sub, sub],
        client=r,
    )
    ready = text(r.lindex(keys.queue("t"), 0))
    assert re.fullmatch(r'\{"enqueued_ms":\d+,"fanout_seq":0,"fanout_collect":true,"id".*', ready)
    assert ready.endswith(sub[1:])
    pending = text(r.lindex(keys.fanout_pending("F"), 0))
    assert pending == '{"fanout_seq":1,"fanout_collect":true,' + sub[1:]
