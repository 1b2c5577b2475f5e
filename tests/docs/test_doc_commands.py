"""The `taskscale ...` commands the README and the chart's NOTES.txt show
still parse and run against a real Redis (docs cannot drift from the CLI),
and so does every block of the production guide marked ``<!-- test: redis -->``.

Placeholders are filled in: ``<url>`` with the test server, ``ID`` with a
real task id, ``[--flag]`` dropped. A command may answer "not found" for the
documentation's example type (exit 1, or 3 for ``task ID``); a usage error
(exit 2) or a traceback fails the test. The guide's blocks run as written,
in bash, and every command in them must succeed. (The README's Kubernetes
quick start, NOTES.txt's kubectl lines and the guide's ``kube`` blocks run
against a real API server in tests/chart/test_doc_commands_kube.py.)
"""

from __future__ import annotations

import io
import re
import shlex
import sys
from pathlib import Path

import pytest

from support.docs import GUIDE, run_bash, sh_blocks
from taskscale.cli import main

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "README.md", REPO / "charts/taskscale/templates/NOTES.txt"]
#: Subcommands that return at once (worker, scheduler, controller, demo run on).
ONE_SHOT = {
    "enqueue",
    "status",
    "dead",
    "delayed",
    "queue",
    "task",
    "types",
    "cancel",
    "fanout",
    "schedules",
    "limits",
}


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for source in SOURCES:
        for line in source.read_text().splitlines():
            text = line.strip()
            if not text.startswith("taskscale "):
                continue
            words = text.split()
            if len(words) > 1 and words[1] in ONE_SHOT:
                found.append((source.name, text))
    return found


def test_the_docs_show_one_shot_commands() -> None:
    names = {cmd.split()[1] for _, cmd in documented_commands()}
    assert {"enqueue", "status", "dead", "delayed", "queue", "task", "types"} <= names


class _Terminal(io.StringIO):
    """A stdin that is a terminal, with the answers already typed."""

    def isatty(self) -> bool:
        return True


def test_documented_commands_run(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TASKSCALE_REDIS_URL", redis_url)
    monkeypatch.setenv("TASKSCALE_NAMESPACE", "taskscale")
    # typed on a terminal, as the README shows them: a command that deletes
    # asks (cli/common.confirm), and the reader answers y
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n" * 100))
    assert main(["enqueue", "email", "--delay", "3600"]) == 0
    task_id = capsys.readouterr().out.split()[0]
    for source, command in documented_commands():
        text = command.split(" #", 1)[0].replace("<url>", redis_url)
        text = re.sub(r"\[(--[a-z-]+)\]", "", text)
        argv = [task_id if w == "ID" else w for w in shlex.split(text)[1:]]
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        assert code in (0, 1, 3), f"{source}: {command!r} exited {code}: {out.err}"
        assert "Traceback" not in out.err, f"{source}: {command!r}: {out.err}"


def test_every_shell_block_of_the_guide_says_whether_and_where_it_runs() -> None:
    blocks = sh_blocks(GUIDE)
    unmarked = [b.line for b in blocks if not b.marker]
    assert not unmarked, f"docs/operating.md: sh blocks without a test marker at lines {unmarked}"
    assert {b.marker for b in blocks} == {"redis", "kube", "skip"}
    assert all(b.reason for b in blocks if b.marker == "skip"), "a skip must say why"


def test_the_guides_redis_blocks_run(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["enqueue", "email", "--delay", "3600", "--redis-url", redis_url]) == 0
    task_id = capsys.readouterr().out.split()[0]
    env = {
        "TASKSCALE_REDIS_URL": redis_url,
        "TASKSCALE_NAMESPACE": "taskscale",
        "TYPE": "email",
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
    }
    blocks = [b for b in sh_blocks(GUIDE) if b.marker == "redis"]
    assert blocks
    for block in blocks:
        script = re.sub(r"\bID\b", task_id, block.text)
        result = run_bash(script, env=env)
        where = f"docs/operating.md line {block.line}"
        assert result.returncode == 0, f"{where}: exit {result.returncode}\n{result.stderr}"
        assert "Traceback" not in result.stderr, f"{where}: {result.stderr}"
        assert result.stdout.strip(), f"{where}: printed nothing"
