"""Every test here runs the compiled TypeScript client: built (or rebuilt
from newer sources) before the test starts anything, and skipped, saying
why, where ``node`` is absent."""

from __future__ import annotations

import pytest

from support.node_client import built_client


@pytest.fixture(autouse=True)
def typescript_client() -> None:
    built_client()
