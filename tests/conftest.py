"""Shared fixtures: a real redis-server per test session, flushed per test.

Tests that take ``redis_url`` (or ``r``) run on one plain server; the
modules in ``ON_CLUSTER_TOO`` (the runtime's core tests) run each such test
on a real Redis Cluster as well, through the ``backend`` fixture.  The
cluster, the Sentinel setup and the TLS server (tests/support/topologies.py)
are started once per session, when a test first asks for them.  ``keys`` and
``producer`` are the default namespace's, for every test that takes them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

TESTS = Path(__file__).resolve().parent
# tests/ for the shared helpers (``from support.waiting import wait_until``);
# the repository for bench/ and e2e/, which some tests and helpers import.
for _path in (TESTS.parent, TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import taskscale.examples  # noqa: E402, F401  (registers noop, sleep, echo, fail)
from support.kube_cluster import *  # noqa: E402, F403  (the kube_cluster fixtures)
from support.redis_server import RedisServer  # noqa: E402
from support.topologies import ClusterServers, SentinelServers, TlsServer  # noqa: E402
from taskscale.connection import connect  # noqa: E402
from taskscale.keys import Keys  # noqa: E402
from taskscale.producer import Producer  # noqa: E402

#: The runtime's core tests (paths under tests/), run on one server and on a
#: real Redis Cluster; tests/test_on_cluster_too.py checks both are collected.
ON_CLUSTER_TOO = {
    "scripts/test_enqueue_script.py",
    "scripts/test_claim_script.py",
    "scripts/test_outcome_scripts.py",
    "scripts/test_return_scripts.py",
    "worker/test_crash.py",
    "scheduler/test_scheduler.py",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--with-e2e", action="store_true", help="run the end-to-end suite")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # by the file's path, whatever module name the import mode gives it
    path = Path(metafunc.definition.path).resolve()
    module = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""
    if module in ON_CLUSTER_TOO and "redis_url" in metafunc.fixturenames:
        metafunc.parametrize(
            "backend",
            ["single", pytest.param("cluster", marks=pytest.mark.topology)],
            indirect=True,
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_e2e = pytest.mark.skip(reason="end-to-end: pass --with-e2e")
    for item in items:
        if "e2e" in item.keywords and not config.getoption("--with-e2e"):
            item.add_marker(skip_e2e)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[ClusterServers]:
    """3 masters + 3 replicas on loopback (redis-cli --cluster create)."""
    with ClusterServers() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[SentinelServers]:
    """1 master, 1 replica, 3 sentinels on loopback."""
    with SentinelServers() as servers:
        yield servers


@pytest.fixture(scope="session")
def tls_redis() -> Iterator[TlsServer]:
    """A TLS-only redis-server; ``url`` names its CA (ssl_ca_certs)."""
    with TlsServer() as server:
        yield server


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """Which Redis ``redis_url`` points at: "single" unless parametrized."""
    return str(getattr(request, "param", "single"))


@pytest.fixture
def redis_url(request: pytest.FixtureRequest, backend: str) -> Iterator[str]:
    """URL of the session's redis-server (or cluster), flushed before each test."""
    fixture = {"single": "redis_server", "cluster": "redis_cluster"}[backend]
    url: str = request.getfixturevalue(fixture).url
    client = connect(url)
    client.flushall()
    client.close()
    yield url


@pytest.fixture
def r(redis_url: str, backend: str) -> Iterator[redis.Redis]:
    """A client on a freshly flushed Redis (decode_responses=False); a
    RedisCluster when the backend is the cluster."""
    client = redis.Redis.from_url(redis_url) if backend == "single" else connect(redis_url)
    yield client  # type: ignore[misc]
    client.close()


@pytest.fixture
def namespace() -> str:
    return os.environ.get("TASKSCALE_TEST_NAMESPACE", "taskscale")


@pytest.fixture
def keys() -> Keys:
    return Keys("taskscale")


@pytest.fixture
def producer(r: redis.Redis, keys: Keys) -> Producer:
    return Producer(r, keys=keys)
