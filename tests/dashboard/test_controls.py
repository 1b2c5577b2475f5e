"""The console's controls over HTTP (a real app on a real Redis): pause and
resume a type, edit and clear its limits, pause, resume and remove its
schedules -- each needs the token, bad input is 400, an unknown schedule or
one of another type is 404."""

from __future__ import annotations

import pytest
import redis
from dashhelpers import KEYS, dashboard, get, post

from taskscale.limits import get_limits
from taskscale.pausing import paused_types
from taskscale.scheduling.schedules import Schedules

pytestmark = pytest.mark.integration


def test_pause_resume_and_limits_need_the_token(redis_url: str, r: redis.Redis) -> None:
    with dashboard(redis_url) as d:
        code, doc = post(d.url, "api/types/mail/pause", {}, token=None)
        assert code == 403 and paused_types(client=r, keys=KEYS) == {}
        code, doc = post(d.url, "api/types/mail/pause", {})
        assert (code, doc["changed"]) == (200, True)
        assert list(paused_types(client=r, keys=KEYS)) == ["mail"]
        code, doc, _ = get(d.url, "api/types/mail")
        assert doc["state"]["paused_since_ms"] == paused_types(client=r, keys=KEYS)["mail"]
        code, doc = post(d.url, "api/types/mail/resume", {})
        assert (code, doc["changed"]) == (200, True) and paused_types(client=r, keys=KEYS) == {}
        assert post(d.url, "api/types/mail/explode", {})[0] == 404
        assert post(d.url, "api/types/bad%20name/pause", {})[0] == 400

        url = d.url + "api/limits/mail"
        assert post(url, "", {"rate": "10/s", "concurrency": 3}, token=None)[0] == 403
        code, doc = post(url, "", {"rate": "10/s", "burst": "2", "concurrency": 3})
        assert (code, doc["limits"]) == (200, "rate 10/1s (burst 2), concurrency 3")
        got = get_limits(client=r, keys=KEYS)["mail"]
        assert (got.rate, got.burst, got.concurrency) == (10, 2, 3)
        for bad in ({"rate": "fast"}, {"concurrency": "x"}, {"rate": 5}, {"concurrency": 0}):
            code, doc = post(url, "", bad)
            assert code == 400, bad
        assert get_limits(client=r, keys=KEYS)["mail"].concurrency == 3  # unchanged
        code, doc = post(url, "", {"rate": "", "concurrency": ""})
        assert (code, doc["limits"]) == (200, "none") and get_limits(client=r, keys=KEYS) == {}


def test_schedules_pause_resume_remove(redis_url: str, r: redis.Redis) -> None:
    schedules = Schedules(r, keys=KEYS)
    schedules.add("nightly", "mail", every=3600)
    schedules.add("other", "thumbs", every=60)
    with dashboard(redis_url) as d:
        base = d.url + "api/schedules/mail/"
        assert post(base, "nightly/pause", {}, token=None)[0] == 403
        assert post(base, "nightly/pause", {}) == (
            200,
            {"outcome": "done", "done": 1},
        )
        info = schedules.get("nightly")
        assert info is not None and info.paused
        assert post(base, "nightly/resume", {})[0] == 200
        info = schedules.get("nightly")
        assert info is not None and not info.paused
        assert post(base, "other/pause", {})[0] == 404  # thumbs' schedule
        assert post(base, "ghost/pause", {})[0] == 404
        assert post(base, "nightly/explode", {})[0] == 404
        assert post(base, "nightly/remove", {})[0] == 200
        assert schedules.get("nightly") is None
        assert schedules.get("other") is not None
