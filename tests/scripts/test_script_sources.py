"""The Lua scripts as they are sent to Redis: each one self-contained, the
shared logic inlined into every script that needs it."""

from __future__ import annotations


def test_every_script_is_sent_to_redis_self_contained() -> None:
    from pathlib import Path

    from taskscale.luascripts import SCRIPT_NAMES, script_source

    every = sorted(
        p.stem for p in (Path(__file__).resolve().parents[2] / "taskscale/scripts").glob("*.lua")
    )
    assert {*SCRIPT_NAMES, "fanout_submit", "observe", "cancel"} <= set(every)
    for name in every:
        text = script_source(name)
        assert "--! include" not in text, name
    # shared logic is inlined into every script that needs it
    assert "local function fanout_final" in script_source("complete")
    assert "local function fanout_final" in script_source("fail")
    assert "local function back_to_head" in script_source("reap")
    assert "local function back_to_head" in script_source("requeue")
    assert "local function dead_push" in script_source("fail")
    assert "local function dead_push" in script_source("claim")
