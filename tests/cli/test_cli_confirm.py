"""Destructive commands say what they delete and ask (cli/common.confirm): on
a terminal (a pty here) only "y" deletes; without one, ``--yes`` is required."""

from __future__ import annotations

import os
import pty
import subprocess
import time

import pytest
import redis

from support.workers import taskscale_process
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.scheduling.schedules import Schedules

pytestmark = pytest.mark.integration


def no_tty(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    proc = taskscale_process(
        url,
        *argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def on_tty(url: str, answer: str, *argv: str) -> tuple[int, str]:
    """Run with stdin and stderr on a pty, type ``answer``; (exit code, what
    the terminal showed)."""
    main, side = pty.openpty()
    proc = taskscale_process(url, *argv, stdin=side, stdout=side, stderr=side)
    os.close(side)
    shown = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in shown and time.monotonic() < deadline:
        shown += os.read(main, 4096)
    os.write(main, answer.encode() + b"\n")
    code = proc.wait(timeout=60)
    try:
        while chunk := os.read(main, 4096):
            shown += chunk
    except OSError:  # the pty closes with the process
        pass
    os.close(main)
    return code, shown.decode(errors="replace")


def filled(r: redis.Redis) -> Keys:
    """Type t with 3 ready tasks, 2 delayed ones and a schedule's pending run
    (a third delayed task)."""
    keys = Keys("taskscale")
    producer = Producer(r, keys=keys)
    for i in range(3):
        producer.enqueue("t", i)
    for i in range(2):
        producer.enqueue("t", i, delay=3600)
    Schedules(r, keys=keys).add("nightly", "t", cron="0 3 * * *")
    return keys


def test_without_a_terminal_a_purge_needs_yes_and_says_what_it_would_delete(
    redis_url: str, r: redis.Redis
) -> None:
    keys = filled(r)
    refused = no_tty(redis_url, "queue", "purge", "t", "--delayed")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert (
        "would delete 3 ready and 3 delayed task(s) of t, "
        "including the pending run of schedule(s) nightly" in refused.stderr
    )
    assert "add --yes" in refused.stderr
    assert r.llen(keys.queue("t")) == 3 and r.zcard(keys.delayed("t")) == 3
    done = no_tty(redis_url, "queue", "purge", "t", "--delayed", "--yes")
    assert done.returncode == 0 and "purged 6 ready and delayed" in done.stdout
    assert r.llen(keys.queue("t")) == 0 and r.zcard(keys.delayed("t")) == 0
    r.rpush(keys.dead("t"), "{}")
    for argv, what in (
        (("dead", "purge", "t"), "1 dead letter(s) of t"),
        (("schedules", "remove", "nightly"), "schedule nightly and its pending run"),
    ):
        refused = no_tty(redis_url, *argv)
        assert refused.returncode == 2 and f"would delete {what}: " in refused.stderr, argv
    assert r.llen(keys.dead("t")) == 1 and Schedules(r, keys=keys).get("nightly") is not None


def test_on_a_terminal_n_deletes_nothing_and_y_deletes(redis_url: str, r: redis.Redis) -> None:
    keys = filled(r)
    code, shown = on_tty(redis_url, "n", "queue", "purge", "t", "--delayed")
    assert code == 1 and "nothing deleted" in shown
    assert "This deletes 3 ready and 3 delayed task(s) of t, including the pending run" in shown
    assert r.llen(keys.queue("t")) == 3 and r.zcard(keys.delayed("t")) == 3
    code, shown = on_tty(redis_url, "y", "queue", "purge", "t")
    assert code == 0 and "This deletes 3 ready task(s) of t." in shown
    assert "purged 3 ready" in shown
    assert r.llen(keys.queue("t")) == 0 and r.zcard(keys.delayed("t")) == 3
    code, shown = on_tty(redis_url, "", "types", "forget", "t", "--force")
    assert code == 1 and r.zcard(keys.delayed("t")) == 3  # Enter: the default is no


def test_nothing_to_delete_asks_nothing(redis_url: str, r: redis.Redis) -> None:
    done = no_tty(redis_url, "queue", "purge", "empty")
    assert done.returncode == 0 and "purged 0 ready" in done.stdout


def test_yes_is_never_read_from_the_environment() -> None:
    """Every command with --yes lists it in COMMAND_LINE_ONLY (TASKSCALE_YES ignored)."""
    import argparse

    from taskscale.cli import build_parser
    from taskscale.cli.envdefaults import COMMAND_LINE_ONLY

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = [path] if any("--yes" in a.option_strings for a in parser._actions) else []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += walk(sub, (*path, name))
        return found

    with_yes = walk(build_parser(), ())
    assert (
        len(with_yes) == 5
    )  # dead purge, delayed delete, queue purge, types forget, schedules remove
    for path in with_yes:
        assert "--yes" in COMMAND_LINE_ONLY.get(path, frozenset()), path
