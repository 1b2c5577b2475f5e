"""A type's page shows its flow-control limits and its periodic schedules
(issue 24, item 4: the view; editing and pausing are not built yet)."""

from __future__ import annotations

import pytest
import redis
from dashhelpers import KEYS, dashboard, get

from taskscale.limits import set_limits
from taskscale.producer import Producer
from taskscale.scheduling.schedules import Schedules

pytestmark = pytest.mark.integration


def test_the_type_page_shows_limits_and_schedules(redis_url: str, r: redis.Redis) -> None:
    Producer(r, keys=KEYS).enqueue("report", 1, delay=600)
    set_limits("report", rate="5/s", concurrency=2, client=r, keys=KEYS)
    schedules = Schedules(r, keys=KEYS)
    schedules.add("nightly", "report", "<all>", cron="0 3 * * *")
    schedules.add("other", "email", every=60)
    with dashboard(redis_url) as d:
        _, page, _ = get(d.url, "/types/report")
        _, bare, _ = get(d.url, "/types/email")
        _, api, _ = get(d.url, "/api/types/report")
    limits = page.split('id="limits"', 1)[1].split("</p>", 1)[0]
    assert "rate <b>5</b> per 1.0 s" in limits and "at most <b>2</b> running" in limits
    table = page.split('id="schedules"', 1)[1].split("</table>", 1)[0]
    assert 'data-schedule="nightly"' in table and "<code>0 3 * * *</code>" in table
    assert "&lt;all&gt;" in table and "other" not in table
    assert [sc["name"] for sc in api["schedules"]] == ["nightly"]
    assert "none" in bare.split('id="limits"', 1)[1].split("</p>", 1)[0]
