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
import threading
import time
from pathlib import Path

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import get
from selenium.webdriver.common.by import By

from taskscale.keys import Keys
from taskscale.producer import Producer


class DemoOutput:
    """The demo's output, drained by a thread so the test can check how far
    the run is (its table has one row per second) without blocking."""

    def __init__(self, demo: subprocess.Popen[str]) -> None:
        assert demo.stdout is not None
        self.lines: list[str] = []
        self._stream = demo.stdout
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        for line in self._stream:
            self.lines.append(line)

    def close(self) -> None:
        self._thread.join(10)
        self._stream.close()

    def text(self) -> str:
        return "".join(self.lines)

    def find(self, pattern: str, deadline: float) -> re.Match[str]:
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            time.sleep(0.1)
        raise AssertionError(f"the demo never printed {pattern!r}: {self.text()[-2000:]}")

    def second(self) -> int:
        """The last table row printed (seconds into the run)."""
        rows = [re.match(r"^\s+(\d+)s ", line) for line in list(self.lines)]
        return max((int(m.group(1)) for m in rows if m), default=0)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.browser
def test_the_demo_serves_the_dashboard_with_its_workers_and_decisions(tmp_path: Path) -> None:
    shots = Path(os.environ.get("TASKSCALE_SCREENSHOTS") or tmp_path)
    seconds = int(os.environ.get("TASKSCALE_DEMO_SECONDS", "30"))
    argv = ["demo", "--duration", str(seconds), "--idle-threshold", "3"]
    demo = subprocess.Popen(
        [sys.executable, "-m", "taskscale.cli", *argv, "--out", str(tmp_path / "demo.png")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    output = DemoOutput(demo)
    try:
        deadline = time.monotonic() + 120 + seconds
        banner = output.find(r"Redis (redis://\S+) \(namespace (\S+)\)", deadline)
        keys = Keys(banner.group(2).rstrip(");"))
        url = output.find(r"dashboard: (http://127\.0\.0\.1:\d+/) \(operator", deadline).group(1)
        assert get(url, "/")[0] == 200
        # a type nobody serves, to show the warning next to the demo's own type
        with redis.Redis.from_url(banner.group(1)) as client:
            Producer(client, keys=keys).enqueue_many("email", [[n] for n in range(5)])
        with chromium(width=1440, height=860) as browser:
            browser.get(url)
            sleep_row = 'tr[data-type="sleep"]'
            wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, sleep_row))
            # a moment the demo's workers are busy, with some history drawn
            active = sleep_row + ' td[data-field="active"]'
            while output.second() < seconds * 0.5 and time.monotonic() < deadline:
                if output.second() >= seconds * 0.3 and text_of(browser, active) != "0":
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
            while output.second() < seconds - 4 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2.2)  # one more poll of the page, while Redis still runs
            sentences = browser.execute_script(  # in one step: the list is redrawn every poll
                "return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText);",
                card + " li",
            )
            assert any("Lookahead" in s or "Demand" in s for s in sentences), sentences
            browser.save_screenshot(str(shots / "dashboard-scaling.png"))
        demo.wait(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        output.close()
    rest = output.text()
    assert demo.returncode == 0, rest[-2000:]
    for name in ("overview", "type", "scaling"):
        assert (shots / f"dashboard-{name}.png").read_bytes()[:4] == b"\x89PNG"
