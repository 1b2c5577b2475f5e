"""A type's controls in a real browser (chromium through Selenium): unlock
with the token, click Pause (the type is paused in Redis, the page and the
overview say so), Resume, save limits from the form, pause a schedule.
TASKSCALE_SCREENSHOTS=DIR keeps a PNG of the paused type's page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis
from browser import chromium, text_of, unlock, wait_for
from dashhelpers import KEYS, dashboard
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from taskscale.limits import get_limits
from taskscale.pausing import paused_types
from taskscale.producer import Producer
from taskscale.scheduling.schedules import Schedules

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]
SHOTS = os.environ.get("TASKSCALE_SCREENSHOTS", "")


def click_and_accept(browser: WebDriver, css: str) -> None:
    browser.find_element(By.CSS_SELECTOR, css).click()
    browser.switch_to.alert.accept()


def paused_on_page(browser: WebDriver) -> str | None:
    return browser.find_element(By.ID, "pause").get_attribute("data-paused")


def test_pause_resume_limits_and_a_schedule_from_the_type_page(
    redis_url: str, r: redis.Redis
) -> None:
    Producer(r, keys=KEYS).enqueue_many("email", [[1], [2]])
    Schedules(r, keys=KEYS).add("digest", "email", every=3600)
    with dashboard(redis_url) as d, chromium() as browser:
        browser.get(d.url + "types/email")
        unlock(browser, "test-operator-token")
        browser.get(d.url + "types/email")
        assert paused_on_page(browser) == "false"
        click_and_accept(browser, "#pause-type")
        wait_for(browser, lambda b: paused_on_page(b) == "true")
        assert list(paused_types(client=r, keys=KEYS)) == ["email"]
        assert "paused since" in text_of(browser, "#pause")
        if SHOTS:
            browser.save_screenshot(str(Path(SHOTS) / "type-paused.png"))
        browser.get(d.url)
        wait_for(browser, lambda b: text_of(b, 'tr[data-type="email"] [data-field="paused"]'))
        browser.get(d.url + "types/email")
        click_and_accept(browser, "#resume-type")
        wait_for(browser, lambda b: paused_on_page(b) == "false")
        assert paused_types(client=r, keys=KEYS) == {}

        form = browser.find_element(By.ID, "limits-form")
        form.find_element(By.NAME, "rate").send_keys("20/min")
        form.find_element(By.NAME, "concurrency").send_keys("4")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(browser, lambda b: "at most 4 running" in text_of(b, "#limits"))
        got = get_limits(client=r, keys=KEYS)["email"]
        assert (got.rate, got.period_s, got.concurrency) == (20, 60.0, 4)

        click_and_accept(browser, 'tr[data-schedule="digest"] button[data-op="pause"]')
        wait_for(browser, lambda b: "paused" in text_of(b, 'tr[data-schedule="digest"]'))
        info = Schedules(r, keys=KEYS).get("digest")
        assert info is not None and info.paused


def test_read_only_shows_no_controls(redis_url: str, r: redis.Redis) -> None:
    Producer(r, keys=KEYS).enqueue_many("email", [[1]])
    Schedules(r, keys=KEYS).add("digest", "email", every=3600)
    with dashboard(redis_url, token=None) as d, chromium() as browser:
        browser.get(d.url + "types/email")
        wait_for(browser, lambda b: text_of(b, "#pause"))
        for css in ("#pause-type", "#resume-type", "#limits-form", "button.act"):
            assert browser.find_elements(By.CSS_SELECTOR, css) == [], css
