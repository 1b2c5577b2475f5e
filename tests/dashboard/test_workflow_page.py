"""The console's workflow pages: the running workflows listed, and one
workflow's steps with state, timing, results and errors -- rendered for a
plain HTTP client (escaped, unknown ids) and in a real browser (chromium
through Selenium), going from the listing to a workflow by its link and by
the id box."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from browser import chromium, text_of, wait_for
from dashhelpers import KEYS, dashboard, get
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from support.scripts import W, claim, heartbeat
from taskscale.luascripts import scripts_for
from taskscale.workflows import chain, group, step

pytestmark = pytest.mark.integration
HOSTILE = "<script>alert('pwned')</script>"


def _finish(r: redis.Redis, task: dict[str, Any], result: Any) -> None:
    reply = '{"id":' + json.dumps(task["id"]) + ',"ok":true,"result":' + json.dumps(result) + "}"
    scripts_for(r).complete(
        keys=[KEYS.active, KEYS.idle_since, KEYS.inflight(W)],
        args=[KEYS.prefix, 1, task["id"], task["type"], 5, "", 60, reply, ""],
        client=r,
    )


def _fail(r: redis.Redis, task: dict[str, Any], error: str) -> None:
    reply = json.dumps({"id": task["id"], "ok": False, "error_type": "ValueError", "error": error})
    scripts_for(r).fail(
        keys=[KEYS.active, KEYS.idle_since, KEYS.inflight(W)],
        args=[KEYS.prefix, task["id"], task["type"], 5, "dead", 0, error, "", 60, reply, "", 0, ""],
        client=r,
    )


def workflows(r: redis.Redis) -> tuple[str, str]:
    """One running workflow (its first step done) and one failed (its
    second step dead-lettered with a hostile message)."""
    running = chain(step("fetch", 1), group("thumb", "index")).enqueue(
        name="nightly", client=r, keys=KEYS
    )
    failed = chain(step("parse", 2), "store").enqueue(client=r, keys=KEYS)
    heartbeat(r, KEYS)
    (fetch,) = claim(r, KEYS, 1, "fetch")
    _finish(r, fetch, {"pages": 3})
    (parse,) = claim(r, KEYS, 1, "parse")
    _fail(r, parse, HOSTILE)
    return running, failed


def test_the_pages_render_steps_escaped_and_an_unknown_id_is_404(
    redis_url: str, r: redis.Redis
) -> None:
    running, failed = workflows(r)
    with dashboard(redis_url) as d:
        status, listing, _ = get(d.url, "/workflows")
        assert status == 200 and running in listing and "nightly" in listing
        assert failed not in listing  # only running workflows are listed
        status, page, _ = get(d.url, f"/workflows/{failed}")
        assert status == 200
        assert "<script>alert" not in page and "&lt;script&gt;alert(" in page
        assert get(d.url, "/workflows/nope")[0] == 404
        assert get(d.url, "/workflows/a%20b")[0] == 404


@pytest.mark.browser
@pytest.mark.slow
def test_a_workflow_page_shows_each_step_in_a_browser(redis_url: str, r: redis.Redis) -> None:
    running, failed = workflows(r)
    with dashboard(redis_url) as d, chromium() as browser:
        browser.get(d.url + "workflows")
        browser.find_element(By.CSS_SELECTOR, f'a[href$="/workflows/{running}"]').click()
        wait_for(browser, lambda b: text_of(b, "#workflow-state") == "running")
        steps = _steps(browser)
        assert [s[:4] for s in steps] == [
            ["s0", "fetch", "", "succeeded"],
            ["s1", "thumb", "s0", "ready"],
            ["s2", "index", "s0", "ready"],
        ]
        assert steps[0][6] == '{"pages": 3}' and steps[0][5].endswith(" s")
        assert "1/3 steps final" in text_of(browser, "#workflow-summary")

        browser.get(d.url + "workflows")
        browser.find_element(By.ID, "workflow-id").send_keys(failed)
        browser.find_element(By.ID, "workflow-show").click()
        wait_for(browser, lambda b: text_of(b, "#workflow-state") == "failed")
        assert (
            text_of(browser, "#workflow-reason") == f"step s0 (parse) failed: ValueError: {HOSTILE}"
        )
        steps = _steps(browser)
        assert [s[3] for s in steps] == ["failed", "cancelled"]
        assert steps[0][6] == f"ValueError: {HOSTILE}"  # shown as text, not run
        assert steps[1][6] == ""
        assert browser.execute_script("return window.__pwned === undefined")


def _steps(browser: WebDriver) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr")
    return [[c.text.strip() for c in row.find_elements(By.TAG_NAME, "td")] for row in rows]
