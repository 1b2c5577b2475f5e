"""Guard: the runtime's core tests really run on the Redis Cluster too.

tests/conftest.py parametrizes the tests of the modules in ``ON_CLUSTER_TOO``
with ``backend=cluster`` by their path under tests/; a move, a rename or a
changed hook could silently drop every cluster case and the suite would
still pass. This collects those modules in a fresh pytest and counts their
ids.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def on_cluster_too() -> set[str]:
    spec = importlib.util.spec_from_file_location("tests_conftest", HERE / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.ON_CLUSTER_TOO)


def test_the_core_tests_are_collected_on_the_cluster_as_well_as_on_one_server() -> None:
    modules = on_cluster_too()
    assert modules == {
        "scripts/test_enqueue_script.py",
        "scripts/test_claim_script.py",
        "scripts/test_outcome_scripts.py",
        "scripts/test_return_scripts.py",
        "worker/test_crash.py",
        "scheduler/test_scheduler.py",
    }
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + [f"tests/{m}" for m in sorted(modules)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ids = re.findall(
        r"^tests/([\w/]+\.py)::\w+\[(?:[^\]]*-)?(single|cluster)(?:-[^\]]*)?\]$",
        out.stdout,
        re.MULTILINE,
    )
    counts = Counter(ids)
    for module in modules:
        single, cluster = counts[(module, "single")], counts[(module, "cluster")]
        assert cluster > 0, f"{module}: no test collected with backend=cluster"
        assert cluster == single, f"{module}: {single} cases on one server, {cluster} on a cluster"
