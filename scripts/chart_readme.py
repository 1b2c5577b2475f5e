"""Write charts/taskscale/README.md's values table, and the descriptions in
values.schema.json, from values.yaml.

The comment lines right above a key in values.yaml are its description; the
default is the loaded value. A mapping is listed key by key when some key
inside it has a comment, else as one row holding the whole mapping. Every
schema property whose key has a comment gets it as its ``description`` (what
editors and ``helm show values`` readers see).

    python scripts/chart_readme.py          # rewrite the README's table and the schema
    python scripts/chart_readme.py --check  # exit 1 if either is stale

tests/chart/test_chart_readme.py runs the check, so neither can drift.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "taskscale"
START, END = "<!-- values:start -->", "<!-- values:end -->"
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.\-]+):(\s|$)")


def comments(values_yaml: str) -> dict[str, str]:
    """Dotted key path -> the comment block right above that key."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in values_yaml.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if match is None:  # a list item or a continuation line
            pending = []
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        if pending:
            found[".".join(k for _, k in stack)] = " ".join(pending)
        pending = []
    return found


def rows(values: dict[str, Any], notes: dict[str, str], prefix: str = "") -> list[list[str]]:
    out: list[list[str]] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        nested = any(n.startswith(path + ".") for n in notes)
        if isinstance(value, dict) and value and nested:
            if path in notes:
                out.append([path, "", notes[path]])
            out += rows(value, notes, path + ".")
        else:
            out.append([path, json.dumps(value), notes.get(path, "")])
    return out


def table(values_yaml: str) -> str:
    values = yaml.safe_load(values_yaml)
    lines = ["| Key | Default | Description |", "|---|---|---|"]
    for path, default, note in rows(values, comments(values_yaml)):
        cell, text = default.replace("|", "\\|"), note.replace("|", "\\|")
        lines.append(f"| `{path}` | `{cell}` | {text} |")
    return "\n".join(lines)


def render(readme: str, values_yaml: str) -> str:
    """``readme`` with the text between the markers replaced by the table."""
    if START not in readme or END not in readme:
        raise ValueError(f"the README needs the markers {START} and {END}")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table(values_yaml)}\n{END}{tail}"


def describe(schema: dict[str, Any], notes: dict[str, str], prefix: str = "") -> dict[str, Any]:
    """``schema`` with each property's description set from ``notes`` (by dotted path)."""
    out = dict(schema)
    props = schema.get("properties")
    if isinstance(props, dict):
        described = {}
        for key, sub in props.items():
            path = f"{prefix}{key}"
            sub = describe(sub, notes, path + ".")
            if path in notes:
                sub = {
                    "description": notes[path],
                    **{k: v for k, v in sub.items() if k != "description"},
                }
            described[key] = sub
        out["properties"] = described
    return out


def schema_text(schema_json: str, values_yaml: str) -> str:
    return json.dumps(describe(json.loads(schema_json), comments(values_yaml)), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is stale")
    args = parser.parse_args(argv)
    values = (CHART / "values.yaml").read_text()
    stale = 0
    for path, make in (
        (CHART / "README.md", lambda text: render(text, values)),
        (CHART / "values.schema.json", lambda text: schema_text(text, values)),
    ):
        current = path.read_text()
        wanted = make(current)
        if wanted == current:
            continue
        if args.check:
            print(f"{path} is stale: run python scripts/chart_readme.py", file=sys.stderr)
            stale = 1
        else:
            path.write_text(wanted)
    return stale


if __name__ == "__main__":
    sys.exit(main())
