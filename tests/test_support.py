"""tests/support's one way of starting things holds: a subprocess imports
what the tests' workers import, a worker command line is one the CLI takes,
and a wait returns what it waited for or says what it was."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support.waiting import wait_until
from support.workers import REPO, TESTS, process_env, pythonpath, worker_argv
from taskscale.cli import build_parser


def test_a_subprocess_finds_support_and_every_module_beside_the_tests_where_they_are() -> None:
    beside = {
        p.stem: p
        for p in TESTS.glob("*/*.py")
        if p.parent.name != "support" and not p.name.startswith(("test_", "conftest"))
    }
    assert beside, "no module beside the tests: the check checks nothing"
    wanted = {"support.workers": TESTS / "support" / "workers.py", **beside}
    code = (
        "import importlib.util, sys\n"
        "for m in sys.argv[1:]: print(m, importlib.util.find_spec(m).origin)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *wanted],
        env=process_env("redis://127.0.0.1:1/0"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert found == {m: str(path) for m, path in wanted.items()}


def test_pythonpath_starts_with_tests_and_keeps_the_inherited_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    path = pythonpath().split(os.pathsep)
    assert path[0] == str(TESTS)
    assert path[-1] == "/somewhere/else"
    assert str(TESTS / "support") not in path  # support is imported as a package


def test_worker_argv_spells_each_keyword_as_the_flag_the_cli_takes() -> None:
    argv = worker_argv("a,b", "m1", "m2", threads=3, idle_wait=0.5, max_lost=7)
    assert argv == [
        "worker",
        "--types",
        "a,b",
        "--import",
        "m1",
        "--import",
        "m2",
        "--threads",
        "3",
        "--idle-wait",
        "0.5",
        "--max-lost",
        "7",
    ]
    parsed = build_parser().parse_args(argv)
    assert (parsed.threads, parsed.idle_wait, parsed.max_lost) == (3, 0.5, 7)


def test_wait_until_returns_the_value_or_says_what_it_waited_for() -> None:
    calls: list[int] = []

    def third_time() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) >= 3 else None

    assert wait_until(third_time, timeout=5, interval=0) == 3
    with pytest.raises(AssertionError, match="waiting for the answer; last: 0"):
        wait_until(lambda: 0, timeout=0.05, interval=0.01, what="the answer")
