"""`taskscale status` and the console's overview say which types are paused,
since when, the same way (status.collect and console_overview.lua)."""

from __future__ import annotations

import pytest
import redis

from taskscale import status
from taskscale.dashboard.overview_script import read_overview
from taskscale.keys import Keys
from taskscale.pausing import pause_type, paused_types
from taskscale.producer import Call, Producer

pytestmark = pytest.mark.integration


def test_status_and_overview_show_paused_types(r: redis.Redis, keys: Keys) -> None:
    Producer(r, keys=keys).enqueue_many("mail", [Call((1,))])
    Producer(r, keys=keys).enqueue_many("thumbs", [Call((1,))])
    pause_type("mail", client=r, keys=keys)
    pause_type("never-enqueued", client=r, keys=keys)  # listed: a paused type is a type
    found = paused_types(client=r, keys=keys)
    for view in (status.collect(r, keys), read_overview(r, keys)):
        assert view["types"]["mail"]["paused_since_ms"] == found["mail"]
        assert view["types"]["never-enqueued"]["paused_since_ms"] == found["never-enqueued"]
        assert view["types"]["thumbs"]["paused_since_ms"] is None
    text = status.render(status.collect(r, keys))
    rows = {line.split()[0]: line for line in text.splitlines() if line}
    assert "paused" in rows["mail"] and "paused" not in rows["thumbs"]
