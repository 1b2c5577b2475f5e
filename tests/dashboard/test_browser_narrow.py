"""Issue 24, item 5, in a real browser (chromium through Selenium): the
overview fits a 420 px wide window (the wide table scrolls inside itself,
the page does not), and a 404 page carries the console's style."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import KEYS, dashboard
from selenium.webdriver.remote.webdriver import WebDriver

from taskscale.producer import Producer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]
WIDTH = 420
#: Where the screenshots go, to be looked at (unset: not kept).
SHOTS = os.environ.get("TASKSCALE_SCREENSHOTS", "")


@pytest.fixture(scope="module")
def narrow() -> Iterator[WebDriver]:
    with chromium(width=WIDTH, height=800) as driver:
        # headless chromium keeps windows at least 500 px wide: emulate the width
        metrics = {"width": WIDTH, "height": 800, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        yield driver


def _overflow(driver: WebDriver) -> int:
    """Pixels the page is wider than the window (0: no sideways scrolling)."""
    script = "return document.documentElement.scrollWidth - window.innerWidth;"
    return int(driver.execute_script(script))


def test_the_overview_fits_a_420_px_window(
    narrow: WebDriver, redis_url: str, r: redis.Redis
) -> None:
    producer = Producer(r, keys=KEYS)
    for name in ("email", "resize-image-thumbnails", "reports.monthly.generate"):
        producer.enqueue_many(name, [[i] for i in range(3)])
    with dashboard(redis_url) as d:
        narrow.get(d.url)
        assert narrow.execute_script("return window.innerWidth;") <= WIDTH
        cell = 'tr[data-type="reports.monthly.generate"] td[data-field="queued"] b'
        wait_for(narrow, lambda b: text_of(b, cell) == "3")
        if SHOTS:
            narrow.save_screenshot(os.path.join(SHOTS, "overview-420.png"))
        assert _overflow(narrow) <= 0
        # the table itself is wider than the window: it scrolls inside itself
        table = "const t = document.getElementById('overview');"
        assert narrow.execute_script(table + "return t.scrollWidth > t.clientWidth;")
        narrow.get(d.url + "no-such-page")
        wait_for(narrow, lambda b: "Not found" in text_of(b, "h1"))
        if SHOTS:
            narrow.save_screenshot(os.path.join(SHOTS, "404-420.png"))
        assert _overflow(narrow) <= 0
        style = "return getComputedStyle(document.querySelector('header')).backgroundColor;"
        assert narrow.execute_script(style) == "rgb(20, 33, 61)"  # the console's header
