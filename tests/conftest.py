"""Shared fixtures: a real redis-server per test session, flushed per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from redis_server import RedisServer

if (Path(__file__).parent / "kube_fixture.py").exists():
    from kube_fixture import *  # noqa: F403  (the kube_cluster fixture)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--with-e2e", action="store_true", help="run the end-to-end suite")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_e2e = pytest.mark.skip(reason="end-to-end: pass --with-e2e")
    for item in items:
        if "e2e" in item.keywords and not config.getoption("--with-e2e"):
            item.add_marker(skip_e2e)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """URL of the session's redis-server, flushed before each test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A client on a freshly flushed Redis (decode_responses=False)."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def namespace() -> str:
    return os.environ.get("TASKSCALE_TEST_NAMESPACE", "taskscale")
