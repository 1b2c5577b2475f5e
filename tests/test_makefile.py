"""Every `python -m bench.X` / `-m taskscale...` a Makefile target runs exists
(`make bench` once ran a module that did not)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_module_the_makefile_runs_exists() -> None:
    modules = re.findall(r"python -m ([\w.]+)", (REPO / "Makefile").read_text())
    assert "bench.simulate" in modules
    missing = [
        m
        for m in modules
        if not (REPO / (m.replace(".", "/") + ".py")).exists()
        and importlib.util.find_spec(m) is None
    ]
    assert missing == []


def test_every_script_the_makefile_runs_exists() -> None:
    scripts = re.findall(r"bash ([\w./-]+\.sh)", (REPO / "Makefile").read_text())
    assert scripts
    assert [s for s in scripts if not (REPO / s).exists()] == []
