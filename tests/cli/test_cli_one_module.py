"""`taskscale worker` builds only its own part of the command line: it imports
neither the controller, the console nor the demo (issue 26: a new local
worker's start is its imports; the whole CLI's cost a worker about 0.6 s more
on the loaded shared VM, docs/benchmarks.md "The first hour")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from taskscale.cli import SUBCOMMANDS, build_parser, main

PROBE = """
import contextlib, sys
from taskscale.cli import main
with contextlib.suppress(SystemExit):
    main({argv!r})
heavy = ("taskscale.controller", "taskscale.demo", "taskscale.dashboard", "kubernetes")
print("LOADED", ",".join(sorted(m for m in sys.modules if m.startswith(heavy))))
"""


def loaded_by(argv: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.rsplit("LOADED", 1)[1].strip()


@pytest.mark.parametrize("argv", [["worker", "--help"], ["scheduler", "--help"], ["status", "-h"]])
def test_a_runtime_command_imports_nothing_of_the_extras(argv: list[str]) -> None:
    assert loaded_by(argv) == ""


def test_the_full_help_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in SUBCOMMANDS)


def test_an_unknown_command_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["nosuch"])
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_the_worker_parser_holds_its_modules_commands_only() -> None:
    parser = build_parser("worker")
    assert parser.parse_args(["status"]).command == "status"  # same module: there
    with pytest.raises(SystemExit):
        parser.parse_args(["demo"])  # another module's: not built
