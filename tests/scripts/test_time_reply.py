"""A Redis ``TIME`` pair becomes a time in one place, ServerTime.from_reply:
server_time() and the controller's observers (observe.lua, sources.lua, which
read TIME along with their data) all use it."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import taskscale
from taskscale.server_clock import ServerTime


@pytest.mark.parametrize("kind", [int, str, lambda n: str(n).encode()])
def test_a_time_reply_reads_as_integers_or_their_text(
    kind: Callable[[int], int | str | bytes],
) -> None:
    got = ServerTime.from_reply(kind(1_763_750_000), kind(123_456))
    assert got == ServerTime(1_763_750_000, 123_456)
    assert got.ms == 1_763_750_000_123
    assert got.unix_s == 1_763_750_000.123456


def test_unix_s_is_the_observers_former_conversion_to_the_bit() -> None:
    rand = random.Random(7)
    pairs = [(1_763_750_000, 0), (1_763_750_000, 999_999), (0, 1)]
    pairs += [(rand.randrange(2**31), rand.randrange(10**6)) for _ in range(2000)]
    for seconds, micros in pairs:
        reply = (str(seconds).encode(), str(micros).encode())
        assert ServerTime.from_reply(*reply).unix_s == int(reply[0]) + int(reply[1]) / 1e6


def test_no_other_module_converts_micros_itself() -> None:
    package = Path(taskscale.__file__).parent
    by_hand = re.compile(r"/\s*(1e6|1_000_000\b|1000000\b)")
    found = sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if by_hand.search(p.read_text())
    )
    assert found == ["server_clock.py"]
