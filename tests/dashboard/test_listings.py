"""The dead-letter and delayed-task pages past their first 50 entries
(previous / next links, the total), and "delete all" from the API: every
dead letter of the type, not the page shown, and nothing of another type."""

from __future__ import annotations

import json
import re

import pytest
import redis
from dashhelpers import KEYS, dashboard, get, make_dead_letters, post

from taskscale.producer import Producer

pytestmark = pytest.mark.integration

ROW = re.compile(r'<tr data-id="([0-9a-f]+)">')


def rows(html: str) -> list[str]:
    return ROW.findall(html)


def links(html: str) -> dict[str, str]:
    """rel -> href of the pager's links (the first pager of the page)."""
    pager = html[html.index('<nav class="pager"') :]
    pager = pager[: pager.index("</nav>")]
    found = re.findall(r'<a rel="(\w+)" href="([^"]+)"', pager)
    return {rel: href.replace("&amp;", "&") for rel, href in found}


def test_dead_letters_are_browsed_page_by_page(redis_url: str, r: redis.Redis) -> None:
    ids = make_dead_letters(redis_url, r, [f"m{i}" for i in range(123)])
    with dashboard(redis_url) as d:
        _, first, _ = get(d.url, "/dead/fail")
        _, second, _ = get(d.url, "/dead/fail" + links(first)["next"])
        _, third, _ = get(d.url, "/dead/fail" + links(second)["next"])
        _, back, _ = get(d.url, "/dead/fail" + links(third)["prev"])
        _, small, _ = get(d.url, "/dead/fail?start=120&count=10")
        _, beyond, _ = get(d.url, "/dead/fail?start=500")
        _, nonsense, _ = get(d.url, "/dead/fail?start=x")
    assert rows(first) == ids[:50] and rows(second) == ids[50:100] and rows(third) == ids[100:]
    assert rows(back) == ids[50:100]
    assert "1\u201350 of 123" in first and "51\u2013100 of 123" in second
    assert "101\u2013123 of 123" in third
    assert links(first) == {"next": "?start=50&count=50"}
    assert links(second) == {"prev": "?start=0&count=50", "next": "?start=100&count=50"}
    assert links(third) == {"prev": "?start=50&count=50"}
    assert rows(small) == ids[120:] and links(small) == {"prev": "?start=110&count=10"}
    assert rows(beyond) == [] and "no dead letters on this page" in beyond
    assert rows(nonsense) == ids[:50]
    # the bulk buttons act on every letter, whichever page shows them
    assert 'data-confirm="Retry all 123 dead letters of fail?"' in second


def test_delayed_tasks_are_browsed_page_by_page(redis_url: str, r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    ids = [producer.enqueue("sleep", seconds=i, delay=600 + i) for i in range(75)]
    with dashboard(redis_url) as d:
        _, first, _ = get(d.url, "/delayed/sleep")
        _, second, _ = get(d.url, "/delayed/sleep" + links(first)["next"])
        _, api, _ = get(d.url, "/api/delayed/sleep?start=50&count=50")
    assert rows(first) == ids[:50] and rows(second) == ids[50:]  # soonest due first
    assert "1\u201350 of 75" in first and "51\u201375 of 75" in second
    assert links(second) == {"prev": "?start=0&count=50"}
    assert [t["id"] for t in api["tasks"]] == ids[50:] and api["total"] == 75


def test_delete_all_removes_every_dead_letter_of_the_type_and_nothing_else(
    redis_url: str, r: redis.Redis
) -> None:
    make_dead_letters(redis_url, r, [f"m{i}" for i in range(60)])  # more than a page
    other = json.dumps({"envelope": json.dumps({"id": "kept"}), "error": "x", "failed_ms": 1})
    r.rpush(KEYS.dead("email"), other)
    Producer(r, keys=KEYS).enqueue("fail", message="queued, not dead")
    stats_before = {k.decode(): int(v) for k, v in r.hgetall(KEYS.stats("fail")).items()}
    with dashboard(redis_url) as d:
        _, page, _ = get(d.url, "/dead/fail")
        assert len(rows(page)) == 50
        assert post(d.url, "/api/dead/fail/delete", {"all": True}) == (200, {"done": 60})
        assert post(d.url, "/api/dead/fail/delete", {"all": True}) == (200, {"done": 0})
    stats = {k.decode(): int(v) for k, v in r.hgetall(KEYS.stats("fail")).items()}
    assert r.llen(KEYS.dead("fail")) == 0
    assert stats["dead_purged"] == stats_before.get("dead_purged", 0) + 60
    assert stats["enqueued"] == stats_before["enqueued"]  # nothing requeued
    assert {k: v for k, v in stats.items() if k != "dead_purged"} == {
        k: v for k, v in stats_before.items() if k != "dead_purged"
    }
    assert r.lrange(KEYS.dead("email"), 0, -1) == [other.encode()]
    assert r.llen(KEYS.queue("fail", 5)) == 1
