"""A module's ``_private`` names are its own: no module of taskscale/ imports
another's (``from taskscale.x import _name``) or reaches for one through an
imported module or class (``x._name``).  What two modules share is public in
one of them -- or in a third both import (e.g. taskscale/dashboard/state.py,
what the console's pages and API share)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "taskscale"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts)


def absolute(node: ast.ImportFrom, module: str) -> str:
    """The module an ``import from`` in ``module`` names, relative imports resolved
    (``module`` ends in ``.__init__`` for a package's own)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")[: -node.level]
    return ".".join([*base, node.module] if node.module else base)


def root_name(node: ast.expr) -> str | None:
    """``a`` of ``a.b.c``; None when the chain does not start with a name."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def offences(text: str, module: str) -> list[str]:
    """Where ``text`` (the source of ``module``) uses another module's private
    names, as ``line: what``."""
    tree = ast.parse(text)
    imported: set[str] = set()  # local names bound to taskscale modules or their members
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "taskscale":
                    imported.add(alias.asname or "taskscale")
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node, module)
            if source.split(".")[0] != "taskscale":
                continue
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{node.lineno}: from {source} import {alias.name}")
                imported.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and private(node.attr)
            and root_name(node.value) in imported
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_no_module_uses_another_modules_private_names() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = offences(path.read_text(), module_of(path))
        if where:
            found[path.relative_to(REPO).as_posix()] = where
    assert found == {}


def test_the_check_sees_every_way_in() -> None:
    text = (
        "from taskscale.status import _ago\n"
        "from . import api\n"
        "from .data import _text as text\n"
        "from taskscale.dashboard import data as d\n"
        "import taskscale.keys\n"
        "api._in_thread(d._merged, taskscale.keys._x, self._own, __name__, d.__doc__)\n"
    )
    assert offences(text, "taskscale.dashboard.pages") == [
        "1: from taskscale.status import _ago",
        "3: from taskscale.dashboard.data import _text",
        "6: api._in_thread",
        "6: d._merged",
        "6: taskscale.keys._x",
    ]
