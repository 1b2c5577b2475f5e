"""A key of the wrong type never takes the console's overview down (issue 21,
item 6, with the one-call overview of issue 24): the page shows every type
and a warning naming the key, as ``taskscale status`` does."""

from __future__ import annotations

import pytest
import redis

from taskscale.dashboard import data
from taskscale.keys import Keys
from taskscale.producer import Producer
from taskscale.shards import ShardMap

pytestmark = pytest.mark.integration
KEYS = Keys("taskscale")


def test_a_wrong_typed_key_is_a_warning_not_a_failed_overview(r: redis.Redis) -> None:
    producer = Producer(r, keys=KEYS)
    producer.enqueue("good", 1)
    producer.enqueue("bad", 2)
    r.delete(KEYS.stats("bad"))
    r.set(KEYS.stats("bad"), "not a hash")
    with pytest.raises(redis.ResponseError):  # the one-call script cannot read it
        r.hgetall(KEYS.stats("bad"))
    found = data.overview(r, ShardMap(("taskscale",)))
    assert set(found["types"]) >= {"good", "bad"}
    assert found["types"]["good"]["queued"] == 1
    assert set(found["wrong_type_keys"]) == {KEYS.stats("bad")}
    assert any(KEYS.stats("bad") in w for w in found["warnings"])
    # the console's own fields are there, neutral, so the page renders
    assert found["types"]["good"]["due_soon"] == 0 and "stats" not in found["types"]["good"]


def test_the_overview_has_no_wrong_keys_when_all_is_well(r: redis.Redis) -> None:
    Producer(r, keys=KEYS).enqueue("good", 1)
    found = data.overview(r, ShardMap(("taskscale",)))
    assert found["wrong_type_keys"] == {} and found["types"]["good"]["queued"] == 1
