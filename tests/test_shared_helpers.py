"""The helpers there is one of (issue 20): what each must do for all its callers.

tests/test_one_way.py checks no second copy comes back; this checks the one
copy is right (pure: no Redis).
"""

from __future__ import annotations

import pytest

from taskscale.text import as_text


def test_as_text_decodes_bytes_and_passes_text_through() -> None:
    assert as_text(b"caf\xc3\xa9") == "café"
    assert as_text("already") == "already"
    assert as_text(42) == "42"  # an integer reply, e.g. a count


def test_as_text_is_strict_unless_told() -> None:
    with pytest.raises(UnicodeDecodeError):
        as_text(b"\xff")
    # another library's keys (Celery, RQ) may hold anything: read, not refused
    assert as_text(b"a\xffb", errors="replace") == "a\ufffdb"
