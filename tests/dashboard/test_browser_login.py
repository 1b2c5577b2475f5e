"""``--auth-reads`` in a real browser (chromium through Selenium): a visit
without the token lands on the login page, the token signs in, and the live
overview then polls ``/api/`` with the read cookie."""

from __future__ import annotations

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import KEYS, TOKEN
from selenium.webdriver.common.by import By

from taskscale.dashboard.server import serve_in_thread
from taskscale.producer import Producer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]


def test_sign_in_then_the_overview_reads(redis_url: str, r: redis.Redis) -> None:
    Producer(r, keys=KEYS).enqueue_many("email", [[1], [2]])
    running = serve_in_thread(redis_url, namespace="taskscale", token=TOKEN, auth_reads=True)
    try:
        with chromium() as browser:
            browser.get(running.url + "workers")
            wait_for(browser, lambda b: "/login?next=" in b.current_url)
            assert "Sign in" in text_of(browser, "h1")
            box = browser.find_element(By.CSS_SELECTOR, "#login input[name=token]")
            box.send_keys("wrong")
            box.submit()
            wait_for(browser, lambda b: text_of(b, "#login-wrong") == "wrong token")
            box = browser.find_element(By.CSS_SELECTOR, "#login input[name=token]")
            box.send_keys(TOKEN)
            box.submit()
            wait_for(browser, lambda b: b.current_url.endswith("/workers"))
            browser.get(running.url)
            cell = 'tr[data-type="email"] td[data-field="queued"] b'
            wait_for(browser, lambda b: text_of(b, cell) == "2")  # fetch() sent the cookie
    finally:
        running.stop()
