"""The wake-list cap has one definition per language, and they agree.

``lib/wake_cap.lua`` defines ``WAKE_CAP`` for every script (docs/schema.md:
every push onto a wake list is followed by ``LTRIM -64 -1``);
``keys.WAKE_TOKENS_CAP`` is the Python side, passed to fanout_submit and
fanout_add.  No script spells the number itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from taskscale.keys import WAKE_TOKENS_CAP, Keys
from taskscale.luascripts import all_script_names, expand_includes, library_text, script_source
from taskscale.producer import Producer

SCRIPTS = Path(__file__).resolve().parents[2] / "taskscale" / "scripts"


def test_the_lua_cap_is_the_python_cap() -> None:
    (value,) = re.findall(r"^local WAKE_CAP = (\d+)$", library_text("lib/wake_cap.lua"), re.M)
    assert int(value) == WAKE_TOKENS_CAP


def _code(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("name", all_script_names())
def test_no_script_spells_the_cap_and_every_user_defines_it_once(name: str) -> None:
    text = script_source(name)
    code = _code(text)
    assert not re.search(r"LTRIM[^\n]*-64\b", code), f"{name}.lua trims a wake list by a literal"
    assert not re.search(r"math\.min\([^)]*\b64\)", code), name
    if "WAKE_CAP" in code:
        assert len(re.findall(r"^local WAKE_CAP = ", code, re.M)) == 1, name
        uses = [m.start() for m in re.finditer(r"\bWAKE_CAP\b", code)]
        assert uses[0] == code.index("local WAKE_CAP = ") + len("local "), name


def test_every_library_that_uses_the_cap_includes_it() -> None:
    for path in sorted((SCRIPTS / "lib").glob("*.lua")):
        if path.name == "wake_cap.lua":
            continue
        code = _code(path.read_text())
        if "WAKE_CAP" in code:
            assert "--! include lib/wake_cap.lua" in path.read_text(), path.name
            assert "local WAKE_CAP" in expand_includes(path.read_text())


@pytest.mark.integration
def test_a_wake_list_holds_at_most_the_cap(r: redis.Redis, keys: Keys) -> None:
    producer = Producer(r, keys=keys)
    for _ in range(3):
        producer.enqueue_many("capped", [[i] for i in range(WAKE_TOKENS_CAP)])
    assert r.llen(keys.wake("capped")) == WAKE_TOKENS_CAP
    assert r.llen(keys.queue("capped")) == 3 * WAKE_TOKENS_CAP
