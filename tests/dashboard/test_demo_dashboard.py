"""``taskscale demo`` prints the dashboard's URL and serves it during the
run; in a real browser its overview, the ``sleep`` page and the scaling
timeline show the demo's own workers and decisions.

The same run takes the README's screenshots: set TASKSCALE_SCREENSHOTS to a
folder (``docs/img``) to keep them, and TASKSCALE_DEMO_SECONDS for a longer
run (richer sparklines); by default they go to the test's temporary folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import get
from selenium.webdriver.common.by import By

from taskscale.keys import Keys
from taskscale.producer import Producer


def read_until(demo: subprocess.Popen[str], pattern: str, deadline: float) -> re.Match[str]:
    assert demo.stdout is not None
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"the demo never printed {pattern!r}")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.browser
def test_the_demo_serves_the_dashboard_with_its_workers_and_decisions(tmp_path: Path) -> None:
    shots = Path(os.environ.get("TASKSCALE_SCREENSHOTS") or tmp_path)
    seconds = int(os.environ.get("TASKSCALE_DEMO_SECONDS", "21"))
    argv = ["demo", "--duration", str(seconds), "--idle-threshold", "3"]
    demo = subprocess.Popen(
        [sys.executable, "-m", "taskscale.cli", *argv, "--out", str(tmp_path / "demo.png")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 120 + seconds
        banner = read_until(demo, r"Redis (redis://\S+) \(namespace (\S+)\)", deadline)
        client = redis.Redis.from_url(banner.group(1))
        keys = Keys(banner.group(2).rstrip(");"))
        found = read_until(demo, r"dashboard: (http://127\.0\.0\.1:\d+/) \(operator", deadline)
        url = found.group(1)
        assert get(url, "/")[0] == 200
        # a type nobody serves, to show the warning next to the demo's own type
        Producer(client, keys=keys).enqueue_many("email", [[n] for n in range(5)])
        with chromium(width=1440, height=860) as browser:
            browser.get(url)
            sleep_row = 'tr[data-type="sleep"]'
            wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, sleep_row))
            # the moment the demo's workers are busy, with some history drawn
            active = sleep_row + ' td[data-field="active"]'
            opened = time.monotonic()
            while time.monotonic() < opened + seconds * 0.8:
                if time.monotonic() > opened + seconds * 0.4 and text_of(browser, active) != "0":
                    break
                time.sleep(0.2)
            assert "no live worker serves email" in text_of(browser, "#warnings")
            browser.save_screenshot(str(shots / "dashboard-overview.png"))

            browser.get(url + "types/sleep")
            wait_for(browser, lambda b: "taskscale.examples.sleep" in text_of(b, "main"))
            assert browser.find_element(By.NAME, "seconds").get_attribute("value") == "1.0"
            browser.save_screenshot(str(shots / "dashboard-type.png"))

            browser.get(url + "scaling")
            card = '[data-scaler="local/demo"]'
            wait_for(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, card + " li")) >= 2)
            read_until(demo, rf"^\s+{seconds - 4}s ", deadline)
            time.sleep(2.2)  # one more poll of the page, while Redis still runs
            sentences = [e.text for e in browser.find_elements(By.CSS_SELECTOR, card + " li")]
            assert any("Lookahead" in s or "Demand" in s for s in sentences), sentences
            browser.save_screenshot(str(shots / "dashboard-scaling.png"))
        rest, _ = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, rest[-2000:]
    for name in ("overview", "type", "scaling"):
        assert (shots / f"dashboard-{name}.png").read_bytes()[:4] == b"\x89PNG"
