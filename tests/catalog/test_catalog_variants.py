"""``variants``: how many different descriptions the live workers give of a
type (a rolling deploy with a changed signature shows 2 on the type page);
workers that describe it alike count once, whatever their key order."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from taskscale.catalog import read_catalog
from taskscale.keys import Keys

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")


def _worker(r: redis.Redis, worker_id: str, entries: dict[str, dict[str, Any]]) -> None:
    r.zadd(KEYS.workers, {worker_id: int(time.time() * 1000) + 60_000})
    doc = {"format": 1, "types": {t: {"type": t, **e} for t, e in entries.items()}}
    r.hset(KEYS.catalog(worker_id), mapping={"digest": "x", "doc": json.dumps(doc)})


def test_variants_count_the_different_descriptions(r: redis.Redis) -> None:
    old = {"registered": True, "params": [{"name": "x", "kind": "positional_or_keyword"}]}
    new = {"registered": True, "params": [{"name": "x", "kind": "keyword_only"}]}
    same = {"params": [{"kind": "positional_or_keyword", "name": "x"}], "registered": True}
    _worker(r, "w1", {"rolling": old, "steady": old})
    _worker(r, "w2", {"rolling": new, "steady": same})  # same as old, keys reordered
    _worker(r, "w3", {"rolling": old, "steady": old, "alone": old})
    types = read_catalog(r, KEYS)["types"]
    assert types["rolling"]["variants"] == 2
    assert types["steady"]["variants"] == 1
    assert types["alone"]["variants"] == 1
    assert types["rolling"]["workers"] == ["w1", "w2", "w3"]
