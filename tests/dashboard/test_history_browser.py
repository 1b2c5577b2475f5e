"""The history on the console, in a real browser (chromium through Selenium)
against real Redis, real worker processes and a real scheduler: the history
page of a type draws what the workers ran, the overall page sums every type,
and the overview shows real rates on its first load (from the history, not
the difference between two refreshes).

Set TASKSCALE_SCREENSHOTS to a folder (docs/img) to keep the screenshots."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import EXAMPLES, KEYS, dashboard, get
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from support.waiting import wait_until
from support.workers import processes, start_scheduler, start_worker
from taskscale import history
from taskscale.producer import Producer
from taskscale.server_clock import server_time

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium(width=1280, height=1100) as driver:
        yield driver


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TASKSCALE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _legend_sum(browser: WebDriver, field: str) -> float:
    [legend] = browser.find_elements(By.CSS_SELECTOR, f'svg text.legend[data-field="{field}"]')
    return float(legend.get_attribute("data-sum") or "nan")


def test_history_pages_and_first_load_rates(
    browser: WebDriver, redis_url: str, r: redis.Redis, tmp_path: Path
) -> None:
    producer = Producer(r, keys=KEYS)
    producer.enqueue_many("noop", [[i] for i in range(30)])
    producer.enqueue_many("fail", [["on purpose"] for _ in range(3)], max_retries=0)
    producer.enqueue_many("sleep", [[0.05] for _ in range(4)])
    producer.enqueue_many("email", [[i] for i in range(5)])  # no worker: stays queued
    worker = start_worker(
        redis_url, types="noop,fail,sleep", imports=EXAMPLES, heartbeat=1.0, lease=4.0
    )
    with processes(worker, start_scheduler(redis_url)), dashboard(redis_url) as d:
        wait_until(lambda: int(r.hget(KEYS.stats("noop"), "completed") or 0) == 30)
        wait_until(lambda: r.llen(KEYS.dead("fail")) == 3)
        wait_until(lambda: int(r.hget(KEYS.stats("sleep"), "completed") or 0) == 4)
        # every count written (one heartbeat), and its bucket over: a full minute holds it
        wait_until(
            lambda: (
                sum(
                    x.completed
                    for x in history.read(r, KEYS, ["noop"], 120, now_ms=server_time(r, KEYS).ms)
                )
                == 30
            ),
            timeout=10,
        )
        written = history.current_bucket(server_time(r, KEYS).ms)
        wait_until(lambda: history.current_bucket(server_time(r, KEYS).ms) > written, timeout=15)

        # the overview: the first render already has the history's rate (30 in a minute)
        browser.get(d.url)
        row = 'tr[data-type="noop"]'
        wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, row))
        first = browser.execute_script(
            "return document.querySelector(arguments[0]).children[5].textContent", row
        )
        assert first == "0.5"
        dead_rate = text_of(browser, 'tr[data-type="fail"] td[data-field="dead-rate"]')
        assert dead_rate == "0.1"  # 3 in a minute, to one decimal
        browser.save_screenshot(str(_shots(tmp_path) / "dashboard-overview-rates.png"))

        # a type's history: totals and the chart's series add up to what ran
        browser.get(d.url + "history/noop?since=600")
        wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "svg.chart"))
        assert text_of(browser, '#history-totals [data-field="completed"]') == "30"
        assert text_of(browser, '#history-totals [data-field="failed"]') == "0"
        assert _legend_sum(browser, "completed") == pytest.approx(3.0)  # 30 runs / 10 s
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 4
        assert browser.find_elements(By.CSS_SELECTOR, "svg.chart circle.bad")  # the p95 points

        # every type summed, and the scheduler's samples of the queued email tasks
        browser.get(d.url + "history?since=600")
        wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "svg.chart"))
        assert text_of(browser, '#history-totals [data-field="completed"]') == "34"
        assert text_of(browser, '#history-totals [data-field="dead"]') == "3"
        assert _legend_sum(browser, "queued") >= 5
        browser.save_screenshot(str(_shots(tmp_path) / "dashboard-history.png"))
        assert "History" in text_of(browser, "nav a.here")

        code, doc, _ = get(d.url, "api/history?type=fail&since=600")
        assert code == 200 and sum(row["dead"] for row in doc["rows"]) == 3
        assert get(d.url, "api/history?since=5")[0] == 400
        assert get(d.url, "api/history?type=no%20such")[0] == 400
        # the recent runs of a type: what the worker ran, newest first
        browser.get(d.url + "recent/fail")
        outcomes = browser.find_elements(By.CSS_SELECTOR, '#recent td[data-field="outcome"]')
        assert [o.text for o in outcomes] == ["dead"] * 3
        assert "on purpose" in text_of(browser, "#recent tbody")
        browser.get(d.url + "recent/noop")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#recent tbody tr[data-id]")) == 30
        browser.save_screenshot(str(_shots(tmp_path) / "dashboard-recent.png"))
        browser.get(d.url + "history/no%20such")
        assert "No such task type" in text_of(browser, "#not-found")  # the styled 404
