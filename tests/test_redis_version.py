"""The server-version check every process makes when it starts
(taskscale.connection.check): Redis older than 7.0 is refused with one line
and exit 2, before any script fails in a way nobody can read.

No old redis-server is at hand, so the refusal is shown on INFO replies and
on a small stand-in server (tests/support/old_redis.py) that speaks just
enough RESP to say it is 6.2.14; the real redis-server of the fixtures passes.
The controller's check is tests/controller/test_controller_redis_version.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from support.old_redis import TOO_OLD, old_redis
from support.workers import run_taskscale
from taskscale.cli import main
from taskscale.connection import RedisTooOld, check, check_version, connect


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("6.2.14", False),
        ("6.0.0", False),
        ("5.0.7", False),
        ("7.0.0", True),
        ("7.0.15", True),
        ("7.2.4", True),
        ("8.0.2", True),
        ("10.1.0", True),
    ],
)
def test_versions_before_7_0_are_refused(version: str, ok: bool) -> None:
    info = {"redis_version": version, "redis_mode": "standalone"}
    if ok:
        check_version(info)
    else:
        with pytest.raises(RedisTooOld) as raised:
            check_version(info)
        assert str(raised.value) == f"Redis {version} is too old: taskscale needs 7.0 or later"


def test_the_message_is_the_issues_one_line() -> None:
    with pytest.raises(RedisTooOld, match=f"^{re.escape(TOO_OLD)}$"):
        check_version({"redis_version": "6.2.14"})


def test_a_cluster_reply_is_judged_by_its_oldest_node() -> None:
    nodes = {
        "127.0.0.1:7000": {"redis_version": "7.2.4"},
        "127.0.0.1:7001": {"redis_version": "6.2.14"},
    }
    with pytest.raises(RedisTooOld, match=r"^Redis 6\.2\.14 is too old"):
        check_version(nodes)
    check_version({"127.0.0.1:7000": {"redis_version": "7.2.4"}})


@pytest.mark.parametrize("info", [{}, {"redis_version": "unknown"}, {"redis_version": ""}])
def test_a_reply_without_a_readable_version_passes(info: dict[str, str]) -> None:
    check_version(info)  # a proxy that hides it: the check explains failures, never invents one


@pytest.mark.integration
def test_a_real_server_passes(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        check(client)
    finally:
        client.close()


@pytest.fixture
def old_redis_url() -> Iterator[str]:
    with old_redis() as url:
        yield url


def test_a_one_shot_command_on_an_old_server_exits_2_with_one_line(
    old_redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--redis-url", old_redis_url]) == 2
    assert capsys.readouterr().err == f"taskscale status: {TOO_OLD}\n"


WORKER = ["worker", "--import", "taskscale.examples", "--types", "sleep"]


PROCESSES = [WORKER, [*WORKER, "--processes", "2"], ["scheduler"], ["dashboard", "--port", "0"]]


@pytest.mark.parametrize("command", PROCESSES, ids=str)
def test_a_process_on_an_old_server_exits_2_with_one_line(
    old_redis_url: str, command: list[str]
) -> None:
    done = run_taskscale(old_redis_url, *command, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"taskscale {command[0]}: {TOO_OLD}\n"


def test_the_stand_in_server_answers_like_redis(old_redis_url: str) -> None:
    """The fake speaks RESP well enough: a client reads its version."""
    client = connect(old_redis_url)
    try:
        assert client.ping() is True
        assert client.info("server")["redis_version"] == "6.2.14"
    finally:
        client.close()
