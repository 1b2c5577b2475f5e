"""The `taskscale ...` commands the README and the chart's NOTES.txt show
still parse and run against a real Redis (docs cannot drift from the CLI).

Placeholders are filled in: ``<url>`` with the test server, ``ID`` with a
real task id, ``[--flag]`` dropped. A command may answer "not found" for the
documentation's example type (exit 1, or 3 for ``task ID``); a usage error
(exit 2) or a traceback fails the test.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from taskscale.cli import main

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "README.md", REPO / "charts/taskscale/templates/NOTES.txt"]
#: Subcommands that return at once (worker, scheduler, controller, demo run on).
ONE_SHOT = {"enqueue", "status", "dead", "delayed", "queue", "task", "types", "cancel", "fanout"}


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


def test_documented_commands_run(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TASKSCALE_REDIS_URL", redis_url)
    monkeypatch.setenv("TASKSCALE_NAMESPACE", "taskscale")
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
