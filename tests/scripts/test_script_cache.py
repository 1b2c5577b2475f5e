"""luascripts keeps one cache of script objects per client: scripts_for's
Scripts is made of bound_script's objects, whichever is asked first (no Redis
needed: registering a script is local)."""

from __future__ import annotations

import weakref

import redis

from taskscale import luascripts
from taskscale.luascripts import SCRIPT_NAMES, bound_script, scripts_for


def test_scripts_for_is_made_of_the_objects_bound_script_gave_first() -> None:
    client = redis.Redis()
    first = bound_script(client, "claim")
    runtime = scripts_for(client)
    assert runtime.claim is first
    assert all(getattr(runtime, name) is bound_script(client, name) for name in SCRIPT_NAMES)
    assert scripts_for(client) is runtime


def test_there_is_one_per_client_cache() -> None:
    caches = [v for v in vars(luascripts).values() if isinstance(v, weakref.WeakKeyDictionary)]
    assert len(caches) == 1
