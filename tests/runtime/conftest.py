"""Fixtures of the runtime tests."""

from __future__ import annotations

import pytest
import redis

import taskscale.examples  # noqa: F401  (registers noop, sleep, echo, fail)
from taskscale.keys import Keys
from taskscale.producer import Producer

#: The runtime's core tests, run on one server and on a real Redis Cluster.
ON_CLUSTER_TOO = {"test_scripts", "test_crash", "test_scheduler"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # the file's own name, whatever package prefix the import mode gives it
    # (tests/runtime/test_on_cluster_too.py checks the cluster cases are collected)
    module = metafunc.module.__name__.rpartition(".")[2]
    if module in ON_CLUSTER_TOO and "redis_url" in metafunc.fixturenames:
        metafunc.parametrize(
            "backend",
            ["single", pytest.param("cluster", marks=pytest.mark.topology)],
            indirect=True,
        )


@pytest.fixture
def keys() -> Keys:
    return Keys("taskscale")


@pytest.fixture
def producer(r: redis.Redis, keys: Keys) -> Producer:
    return Producer(r, keys=keys)
