"""Issue 24, item 5, over HTTP against the real app and Redis: arguments
render as text (HTML-escaped, never ``\\u003c`` escapes); a read-only
console offers no button that changes state; a cancelled task reads
"cancelled"; a 404 is the styled page."""

from __future__ import annotations

import pytest
import redis
from dashhelpers import EXAMPLES, KEYS, dashboard, get, make_dead_letters

from support.waiting import wait_until
from support.workers import processes, start_worker
from taskscale.cancellation import cancel
from taskscale.catalog import read_catalog
from taskscale.producer import Producer

pytestmark = pytest.mark.integration
TEXT = "<b>é</b>"


def test_arguments_render_as_escaped_text_not_json_escapes(redis_url: str, r: redis.Redis) -> None:
    make_dead_letters(redis_url, r, [TEXT])
    Producer(r, keys=KEYS).enqueue("fail", TEXT, note=TEXT, delay=600)
    with dashboard(redis_url) as d:
        pages = [get(d.url, "/dead/fail")[1], get(d.url, "/delayed/fail")[1]]
    for html in pages:
        args = html.split('<code class="args">', 1)[1].split("</code>", 1)[0]
        assert "\\u" not in args
        assert "&lt;b&gt;é&lt;/b&gt;" in args
        assert "<b>" not in args


def test_a_read_only_console_shows_no_button_that_changes_state(
    redis_url: str, r: redis.Redis
) -> None:
    make_dead_letters(redis_url, r, ["x"])
    Producer(r, keys=KEYS).enqueue("fail", "y", delay=600)
    with processes(start_worker(redis_url, types="sleep", imports=EXAMPLES)):
        wait_until(lambda: "sleep" in read_catalog(r, KEYS)["types"])
        for token, shown in (("tok", True), (None, False)):
            with dashboard(redis_url, token=token) as d:
                _, form, _ = get(d.url, "/types/sleep")
                _, dead, _ = get(d.url, "/dead/fail")
                _, delayed, _ = get(d.url, "/delayed/fail")
            assert ('data-mode="enqueue"' in form) is shown
            assert ('data-mode="call"' in form) is shown
            assert ('id="read-only"' in form) is not shown
            assert ("Retry all" in dead) is shown
            assert ("data-post=" in dead) is shown
            assert ("data-post=" in delayed) is shown


def test_a_cancelled_task_reads_cancelled(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    queued = producer.enqueue("nobody", 1)
    delayed = producer.enqueue("nobody", 2, delay=600)
    untouched = producer.enqueue("nobody", 3)
    assert cancel(queued, client=r, keys=KEYS).state == "queued"
    assert cancel(delayed, client=r, keys=KEYS).state == "delayed"
    r.delete(*KEYS.queues("nobody"))  # the untouched one finished, say: unknown
    with dashboard(redis_url) as d:
        for task_id in (queued, delayed):
            code, doc, _ = get(d.url, f"/api/tasks/{task_id}")
            assert code == 200
            assert doc["state"] == "cancelled", doc
            assert doc["where"] == "before it ran"
            assert doc["type"] == "nobody"
        assert get(d.url, f"/api/tasks/{untouched}")[1]["state"] == "unknown"


def test_a_task_flagged_while_running_reads_cancelled_once_finished(
    redis_url: str, r: redis.Redis
) -> None:
    r.set(KEYS.cancel("t-flagged"), "1", ex=60)  # what cancel.lua leaves on a running task
    with dashboard(redis_url) as d:
        doc = get(d.url, "/api/tasks/t-flagged")[1]
    assert (doc["state"], doc["where"]) == ("cancelled", "while running")


def test_not_found_pages_are_styled_and_the_api_answers_json(redis_url: str) -> None:
    with dashboard(redis_url) as d:
        for path in ("/no-such-page", "/types/bad%20name", "/dead/bad%20name"):
            code, html, headers = get(d.url, path)
            assert code == 404, path
            assert "/static/dashboard.css" in html and "<nav>" in html, path
            assert 'id="not-found"' in html
            assert "script-src 'self'" in headers["content-security-policy"]
        code, doc, _ = get(d.url, "/api/no-such-thing")
        assert code == 404
        assert doc == {"error": "not found"}
