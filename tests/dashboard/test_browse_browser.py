"""Browsing tasks on the console, in a real browser (chromium through
Selenium) against real Redis and a real worker: queued tasks per type and
priority with their arguments (paged, escaped), the tasks running now
(worker, pod, started, elapsed), the task-id box and the argument search
(how many entries it read).

Set TASKSCALE_SCREENSHOTS to a folder (docs/img) to keep the screenshots."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import EXAMPLES, KEYS, dashboard
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from support.waiting import wait_until
from support.workers import processes, start_worker
from taskscale.dashboard import browse_data
from taskscale.producer import Producer
from taskscale.shards import ShardMap

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium(width=1280, height=800) as driver:
        yield driver


def _shot(browser: WebDriver, tmp_path: Path, name: str) -> None:
    folder = Path(os.environ.get("TASKSCALE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(folder / name))


def _ids(browser: WebDriver, table: str) -> list[str]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr[data-id]")
    return [row.get_attribute("data-id") or "" for row in rows]


def test_queued_running_and_find(
    browser: WebDriver, redis_url: str, r: redis.Redis, tmp_path: Path
) -> None:
    producer = Producer(r, keys=KEYS)
    normal = producer.enqueue_many("email", [[f"user-{i}@example.com"] for i in range(60)])
    high = producer.enqueue_many("email", [["<b>vip</b>", {"needle": 1}]], priority="high")
    slow = producer.enqueue_many("sleep", [[30.0], [30.0]])
    with (
        processes(start_worker(redis_url, types="sleep", imports=EXAMPLES, heartbeat=1.0)),
        dashboard(redis_url) as d,
    ):
        # queued, paged: 50 on the first page, next-to-claim first
        browser.get(d.url + "queued/email")
        assert _ids(browser, "queued") == normal[:50]
        assert "user-0@example.com" in text_of(browser, f'tr[data-id="{normal[0]}"]')
        assert "1\u201350 of 60" in text_of(browser, ".pager")
        browser.find_element(By.CSS_SELECTOR, "a[rel=next]").click()
        wait_for(browser, lambda b: _ids(b, "queued") == normal[50:])
        # another priority, and its arguments shown as text, not markup
        browser.find_element(By.CSS_SELECTOR, '#priorities a[data-priority="0"]').click()
        wait_for(browser, lambda b: _ids(b, "queued") == high)
        assert '"<b>vip</b>"' in text_of(browser, f'tr[data-id="{high[0]}"]')
        assert not browser.find_elements(By.CSS_SELECTOR, "#queued td b")
        _shot(browser, tmp_path, "dashboard-queued.png")

        # running: both sleep tasks, on the worker, with started and elapsed
        def both_running_with_start() -> bool:
            doc = browse_data.running(r, ShardMap(("taskscale",)))
            return sorted(t["id"] for t in doc["tasks"] if t["started_ms"]) == sorted(slow)

        wait_until(both_running_with_start, timeout=30)
        browser.get(d.url + "running")
        assert sorted(_ids(browser, "running")) == sorted(slow)
        row = text_of(browser, f'tr[data-id="{slow[0]}"]')
        assert "sleep" in row and "[30.0]" in row
        [worker] = [w.decode() for w in r.zrange(KEYS.workers, 0, -1)]
        assert worker in row
        elapsed = text_of(browser, f'tr[data-id="{slow[0]}"] td[data-field="elapsed"]')
        assert elapsed.endswith(" s") and 0 <= float(elapsed[:-2]) < 60
        _shot(browser, tmp_path, "dashboard-running.png")

        # the task-id box
        browser.get(d.url + "find")
        box = browser.find_element(By.CSS_SELECTOR, '#find-id input[name="id"]')
        box.send_keys(high[0])
        box.submit()
        wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#lookup"))
        assert text_of(browser, '#lookup [data-field="state"]') == "queued"
        browser.get(d.url + "find?id=" + slow[1])
        assert text_of(browser, '#lookup [data-field="state"]') == "running"
        browser.get(d.url + "find?id=no-such-task")
        assert text_of(browser, '#lookup [data-field="state"]') == "unknown"
        browser.get(d.url + "find?id=" + "bad%20id")
        assert "task id" in text_of(browser, "#find-error")

        # the argument search: one match, and it says how many entries it read
        browser.get(d.url + "find")
        q = browser.find_element(By.CSS_SELECTOR, '#find-args input[name="q"]')
        q.send_keys("needle")
        q.submit()
        wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#search"))
        assert _ids(browser, "matches") == high
        assert text_of(browser, '#search [data-field="examined"]') == "61"  # 60 + 1 queued
        _shot(browser, tmp_path, "dashboard-find.png")
        browser.get(d.url + "find?q=user-1&type=email")
        assert len(_ids(browser, "matches")) == 11  # user-1, user-10..19


def test_the_search_stops_at_its_cap(r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    Producer(r, keys=KEYS).enqueue_many("email", [[i] for i in range(30)])
    monkeypatch.setattr(browse_data, "SEARCH_CAP", 12)
    found = browse_data.search(r, ShardMap(("taskscale",)), "nothing like it")
    assert (found["examined"], found["capped"], found["matches"]) == (12, True, [])
    with pytest.raises(ValueError, match="empty"):
        browse_data.search(r, ShardMap(("taskscale",)), "")
    with pytest.raises(ValueError, match="over 200"):
        browse_data.search(r, ShardMap(("taskscale",)), "x" * 201)
