"""The images behave as the chart assumes: non-root, read-only root, drain on SIGTERM.

Run with the Docker engine only (no cluster): the containers share the host
network to reach a host redis-server, and run with the same restrictions as
the chart's pods (read-only root, a tmpfs /tmp, no capabilities, no privilege
escalation).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from e2e.support import HostRedis, build_images
from support.kube_cluster import wait_for
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.status import collect

DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
RESTRICTED = [
    "--read-only",
    "--tmpfs",
    "/tmp:rw,size=16m",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--network",
    "host",
]


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    return build_images()


@pytest.fixture
def host_redis() -> Iterator[HostRedis]:
    server = HostRedis().start()
    try:
        yield server
    finally:
        server.stop()


def docker(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.mark.parametrize("target", ["worker", "controller"])
def test_image_runs_as_numeric_non_root_user_with_exec_entrypoint(
    images: dict[str, str], target: str
) -> None:
    config = json.loads(docker("image", "inspect", images[target]).stdout)[0]["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["taskscale", target]
    whoami = docker("run", "--rm", *RESTRICTED, "--entrypoint", "id", images[target]).stdout
    assert whoami.startswith("uid=10001(taskscale) gid=10001(taskscale)")


def test_controller_image_starts_under_a_read_only_root(images: dict[str, str]) -> None:
    result = docker("run", "--rm", *RESTRICTED, images["controller"], "--help")
    assert "--leader-elect" in result.stdout and "--watch-namespace" in result.stdout
    # The controller's modules import without the plotting stack.
    probe = docker(
        "run",
        "--rm",
        *RESTRICTED,
        "--entrypoint",
        "python3",
        images["controller"],
        "-c",
        "import taskscale.controller.kube, taskscale.controller.leader, importlib.util as u;"
        "print(u.find_spec('matplotlib') is None)",
    )
    assert probe.stdout.strip() == "True"


def test_worker_container_drains_on_sigterm_and_loses_nothing(
    images: dict[str, str], host_redis: HostRedis
) -> None:
    keys = Keys("e2eimg")
    client = redis.Redis.from_url(host_redis.url())
    producer = Producer(client, keys=keys)
    producer.enqueue_many("sleep", [[3.0] for _ in range(6)])
    name = f"ts-worker-{uuid.uuid4().hex[:6]}"
    docker(
        "run", "-d", "--name", name, *RESTRICTED,
        "-e", f"TASKSCALE_REDIS_URL={host_redis.url()}",
        "-e", "TASKSCALE_NAMESPACE=e2eimg",
        "-e", f"POD_NAME={name}",
        images["worker"],
        "--import", "taskscale.examples", "--types", "sleep", "--threads", "2", "--grace", "20",
    )  # fmt: skip
    try:
        wait_for(
            lambda: collect(client, keys)["types"]["sleep"]["active"] == 2,
            timeout=60,
            what="the container to claim two tasks",
        )
        started = time.monotonic()
        docker("stop", "--time", "40", name, timeout=90)
        stopped_after = time.monotonic() - started
        state = json.loads(docker("inspect", name).stdout)[0]["State"]
        assert state["ExitCode"] == 0, docker("logs", name).stderr[-2000:]
        # It finished what it was running (3 s tasks), well before a SIGKILL.
        assert stopped_after < 35
        sleep = collect(client, keys)["types"]["sleep"]
        assert sleep["active"] == 0
        assert sleep["completed"] == 2
        assert sleep["queued"] == 4  # never claimed: nothing hoarded, nothing lost
    finally:
        docker("rm", "-f", name, check=False)
