"""``taskscale demo`` prints the dashboard's URL and serves it during the
run, with the demo's scaling decisions on the scaling API."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dashhelpers import get


@pytest.mark.slow
@pytest.mark.integration
def test_the_demo_serves_the_dashboard_with_its_scaling_decisions(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "taskscale.cli",
            "demo",
            "--duration",
            "21",
            "--idle-threshold",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert demo.stdout is not None
        url = None
        deadline = time.monotonic() + 90
        while url is None and time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            found = re.search(r"dashboard: (http://127\.0\.0\.1:\d+/) \(operator token", line)
            url = found.group(1) if found else None
        assert url is not None, "the demo printed no dashboard URL"
        assert get(url, "/")[0] == 200
        scalers: list[dict[str, object]] = []
        while not scalers and time.monotonic() < deadline:
            scalers = get(url, "/api/scalers")[1]["scalers"]
            time.sleep(0.2)
        assert scalers and scalers[0]["scaler"] == "local/demo"
        rest, _ = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, rest[-2000:]
