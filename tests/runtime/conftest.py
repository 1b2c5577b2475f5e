"""Fixtures of the runtime tests."""

from __future__ import annotations

import pytest
import redis

import taskscale.examples  # noqa: F401  (registers noop, sleep, echo, fail)
from taskscale.keys import Keys
from taskscale.producer import Producer


@pytest.fixture
def keys() -> Keys:
    return Keys("taskscale")


@pytest.fixture
def producer(r: redis.Redis, keys: Keys) -> Producer:
    return Producer(r, keys=keys)
