"""A real browser for the dashboard tests: Debian's chromium driven by
Selenium through Debian's chromedriver, both given by path, so Selenium
Manager never downloads anything (scripts/setup.sh installs them)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path(os.environ.get("TASKSCALE_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("TASKSCALE_CHROMEDRIVER", "/usr/bin/chromedriver"))


@contextmanager
def chromium(*, width: int = 1440, height: int = 900) -> Iterator[WebDriver]:
    """A headless chromium session; quit on exit."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            raise RuntimeError(f"{path} missing: run scripts/setup.sh (chromium, chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",  # tests may run as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, probe: Callable[[WebDriver], Any], *, timeout: float = 30.0) -> Any:
    """Poll ``probe(driver)`` until truthy (returned) or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = probe(driver)
            if value:
                return value
        except Exception as exc:  # an element replaced between find and read: try again
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"browser condition not met within {timeout} s (last error: {last})")


def text_of(driver: WebDriver, css: str) -> str:
    """The rendered text of the first match ("" if none), read in one step:
    the live pages replace their rows every poll, so a found element may be
    gone by the time its text would be asked for."""
    script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';"
    return str(driver.execute_script(script, css)).strip()


def unlock(driver: WebDriver, token: str) -> None:
    """Type the operator token into the header's box and wait for "unlocked"."""
    box = driver.find_element(By.ID, "token")
    box.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#unlock button").click()
    wait_for(driver, lambda d: text_of(d, "#mode") == "unlocked", timeout=15)
