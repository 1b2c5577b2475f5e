"""Celery and RQ stay optional: only taskscale.integrations names them, and
only inside functions, so importing taskscale (or the integration modules
themselves) needs neither."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUEUES = ("celery", "rq")


def top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in tree.body:  # module level only: imports inside functions are lazy
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_no_module_imports_celery_or_rq_at_import_time() -> None:
    offenders = {
        str(p.relative_to(REPO)): sorted(top_level_imports(p) & set(QUEUES))
        for p in sorted((REPO / "taskscale").rglob("*.py"))
        if top_level_imports(p) & set(QUEUES)
    }
    assert offenders == {}


def test_importing_the_integrations_loads_neither_queue() -> None:
    code = (
        "import sys, taskscale, taskscale.integrations.celery, taskscale.integrations.rq\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('celery', 'rq')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
