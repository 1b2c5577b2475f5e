"""The scripts other languages load as plain files work as they are.

docs/schema.md tells a producer or worker in another language to load
``enqueue.lua`` and the ``track_*.lua`` scripts with ``SCRIPT LOAD`` of the
file: they hold their libraries as inline copies (``--! inline`` ...
``--! end inline``) instead of include lines.  These tests hold every copy
equal to its library, so the library stays the one definition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import redis

from taskscale.luascripts import STANDALONE, expand_includes, inline_copies, library_text

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "taskscale" / "scripts"


@pytest.mark.parametrize("name", STANDALONE)
def test_a_standalone_script_has_no_include_line_and_needs_no_expansion(name: str) -> None:
    raw = (SCRIPTS / f"{name}.lua").read_text()
    assert not re.search(r"^--! include ", raw, re.M)
    assert expand_includes(raw) == raw
    assert inline_copies(raw), f"{name}.lua copies no library: it needs no inline block"


@pytest.mark.parametrize(
    ("name", "library"),
    [(n, lib) for n in STANDALONE for lib, _ in inline_copies((SCRIPTS / f"{n}.lua").read_text())],
)
def test_every_inline_copy_equals_its_library(name: str, library: str) -> None:
    copies = dict(inline_copies((SCRIPTS / f"{name}.lua").read_text()))
    assert copies[library] == library_text(library), (
        f"{name}.lua's copy of {library} differs from the library: paste it again"
    )


def test_a_copy_that_drifts_is_caught() -> None:
    raw = (SCRIPTS / "enqueue.lua").read_text()
    drifted = raw.replace("math.floor(tonumber(clock[2]) / 1000)", "tonumber(clock[2])", 1)
    assert drifted != raw
    assert dict(inline_copies(drifted))["lib/clock.lua"] != library_text("lib/clock.lua")


@pytest.mark.integration
def test_enqueue_lua_loaded_as_a_plain_file_enqueues(r: redis.Redis) -> None:
    sha = r.script_load((SCRIPTS / "enqueue.lua").read_text())
    envelope = json.dumps({"id": "plain-1", "type": "t", "args": [], "kwargs": {}})
    r.evalsha(sha, 1, "{ns}:types", "{ns}:", "t", 0, 1048576, envelope)
    (queued,) = r.lrange("{ns}:q:t:5", 0, -1)
    assert json.loads(queued)["id"] == "plain-1"
    assert isinstance(json.loads(queued)["enqueued_ms"], int)


@pytest.mark.integration
@pytest.mark.parametrize("name", [n for n in STANDALONE if n.startswith("track_")])
def test_a_tracking_script_loads_as_a_plain_file(r: redis.Redis, name: str) -> None:
    assert r.script_load((SCRIPTS / f"{name}.lua").read_text())
