"""What scripts/setup.sh installs for `make demo` and for `make test`
(TASKSCALE_SETUP_PLAN=1 prints the plan and installs nothing).

Issue 26: `make demo` took 4 min 50 s on a fresh machine, 3.5 min of it
installing chromium, chromium-driver and prometheus, which the demo never
uses; the demo's setup is redis-server and the dashboard + demo extras.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def plan(**env: str) -> dict[str, str]:
    done = subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=REPO,
        env={**os.environ, "TASKSCALE_SETUP_PLAN": "1", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return dict(line.split(": ", 1) for line in done.stdout.splitlines())


def test_the_demo_installs_redis_and_its_extras_only() -> None:
    demo = plan(TASKSCALE_SETUP_DEMO="1")
    assert demo["apt"].split() == ["redis-server"]
    assert demo["extras"] == "dashboard,demo"
    assert demo["kube"] == "0"  # no Kubernetes build either


def test_make_test_still_installs_the_test_tools() -> None:
    full = plan()
    assert {"redis-server", "chromium", "chromium-driver", "prometheus"} <= set(full["apt"].split())
    assert set(full["extras"].split(",")) == {"controller", "dashboard", "demo", "dev"}
    assert full["kube"] == "1"
    assert plan(TASKSCALE_SETUP_KUBE="0")["kube"] == "0"


def test_make_demo_runs_the_demo_setup() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^demo:\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    assert "TASKSCALE_SETUP_DEMO=1 bash scripts/setup.sh" in recipe.group(1)


def test_the_demo_needs_no_package_outside_its_extras() -> None:
    """The demo's modules import nothing of the controller extra (kubernetes)."""
    code = (
        "import sys, taskscale.demo.run, taskscale.dashboard.server, taskscale.cli; "
        "print(','.join(m for m in ('kubernetes', 'selenium', 'yaml') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == ""
