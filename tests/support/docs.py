"""What the documentation shows, extracted from the files themselves so the
tests that run or parse it cannot drift from what a reader copies.

The commands:

* the production guide (docs/operating.md): every ``sh`` block carries a
  marker on the line before its fence -- ``<!-- test: redis -->`` (run against
  a real Redis), ``<!-- test: kube -->`` (run against a real API server with
  the chart installed) or ``<!-- test: skip (why) -->``;
* the README's Kubernetes quick start: the first ``sh`` block under
  "### On Kubernetes"; its Quickstart's shell: the first under "### Producing";
* NOTES.txt as Helm renders it: its indented command lines.

The manifests: docs/from-keda.md's YAML blocks, each under a
``<!-- from-keda: NAME -->`` marker.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "operating.md"
README = REPO / "README.md"
FROM_KEDA = REPO / "docs" / "from-keda.md"

_FROM_KEDA_BLOCK = re.compile(r"<!-- from-keda: ([a-z-]+) -->\n```yaml\n(.*?)```", re.S)
_MARKER = re.compile(r"<!--\s*test:\s*(redis|kube|skip)\b\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One fenced ``sh`` block: its marker, the reason of a skip, its text."""

    marker: str
    reason: str
    text: str
    line: int  #: 1-based line of the opening fence

    def commands(self) -> list[str]:
        """Its commands: comment lines dropped, continuation lines joined."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        lines = (c.strip() for c in joined.splitlines())
        return [c for c in lines if c and not c.startswith("#")]


def sh_blocks(path: Path) -> list[Block]:
    """Every ```sh block of ``path`` with its marker (marker "" when none)."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found = _MARKER.search(before)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        blocks.append(
            Block(
                marker=found.group(1) if found else "",
                reason=found.group(2).strip("() ") if found else "",
                text="\n".join(lines[i + 1 : end]),
                line=i + 1,
            )
        )
        i = end + 1
    return blocks


def readme_block(heading: str) -> str:
    """The text of the first ``sh`` block under the README's ``heading``."""
    text = README.read_text()
    section = text[text.index(heading) :]
    block = section[section.index("```sh\n") + len("```sh\n") :]
    return block[: block.index("```")]


def readme_kubernetes_quick_start() -> list[str]:
    """The commands of the README's "### On Kubernetes" shell block."""
    return Block("kube", "", readme_block("### On Kubernetes"), 0).commands()


def notes_commands(rendered: str) -> list[str]:
    """The command lines of a rendered NOTES.txt (indented lines that start
    with a command; a trailing ``# comment`` is kept for bash to drop)."""
    starts = ("kubectl ", "taskscale ", "curl ", "helm ")
    return [
        line.strip()
        for line in rendered.splitlines()
        if line[:1].isspace() and line.strip().startswith(starts)
    ]


def run_bash(
    script: str, *, env: Mapping[str, str], cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``bash -euo pipefail`` (a failing command fails it)."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def from_keda_blocks() -> dict[str, list[dict[str, Any]]]:
    """docs/from-keda.md's marked YAML blocks by marker, each as its list of documents."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name, text in _FROM_KEDA_BLOCK.findall(FROM_KEDA.read_text()):
        assert name not in found, f"marker {name} used twice"
        found[name] = [doc for doc in yaml.safe_load_all(text) if doc]
    return found


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one document of ``kind`` among ``docs``."""
    matching = [d for d in docs if d.get("kind") == kind]
    assert len(matching) == 1, f"expected one {kind}, found {len(matching)}"
    return matching[0]
