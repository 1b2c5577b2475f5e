"""The drain flags in Redis (controller/drain_flags.py, drain_flags.lua):
flagged once with the time first seen, cleared, in every namespace of a
sharded list; a malformed time is still a flag; a wrong-typed key refused."""

from __future__ import annotations

import pytest
import redis

from support.controller import redis_ms
from taskscale.controller.drain_flags import sync_flags
from taskscale.keys import Keys

pytestmark = pytest.mark.integration


def test_pods_are_flagged_once_and_keep_the_time_first_seen(r: redis.Redis) -> None:
    keys = Keys("dflags")
    before = redis_ms(r)
    first = sync_flags(r, "dflags", ["p1", "p2"], ["p3"])
    assert first.new == ("p1", "p2")
    assert set(first.since_ms) == {"p1", "p2"}
    since = first.since_ms["p1"]
    assert since is not None and before <= since <= redis_ms(r)
    again = sync_flags(r, "dflags", ["p1"], ["p2"])
    assert again.new == () and again.since_ms == {"p1": since}  # p2 cleared, p1 kept its time
    assert r.hkeys(keys.draining) == [b"p1"]
    assert sync_flags(r, "dflags", [], ["p1"]).since_ms == {}
    assert not r.exists(keys.draining)


def test_every_namespace_of_a_sharded_list_gets_the_flags(r: redis.Redis) -> None:
    got = sync_flags(r, "dshard-a,dshard-b", ["p1"], [])
    assert got.new == ("p1",)
    for ns in ("dshard-a", "dshard-b"):
        assert r.hexists(Keys(ns).draining, "p1")
    sync_flags(r, "dshard-a,dshard-b", [], ["p1"])
    assert not r.exists(Keys("dshard-a").draining, Keys("dshard-b").draining)


def test_a_malformed_time_is_still_a_flag(r: redis.Redis) -> None:
    r.hset(Keys("dbad").draining, mapping={"p1": "not a time", "p2": "1e400"})
    got = sync_flags(r, "dbad", [], [])
    assert got.since_ms == {"p1": None, "p2": None}


def test_a_draining_key_of_another_type_is_refused_untouched(r: redis.Redis) -> None:
    r.set(Keys("dwrong").draining, "x")
    with pytest.raises(redis.ResponseError, match="BADKEY"):
        sync_flags(r, "dwrong", ["p1"], [])
    assert r.get(Keys("dwrong").draining) == b"x"
