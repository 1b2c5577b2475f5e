"""The Lua scripts that make every state change, loaded once per client.

Each change of queue state (enqueue, claim, complete, fail, requeue,
promote, reap, heartbeat) is one script in ``taskscale/scripts/*.lua`` so it
is atomic: a crash between two Redis commands cannot lose a task or skew a
counter.  The files are read once per process; each client gets
``register_script`` objects, which call EVALSHA and load the script again
by themselves after a Redis restart (NOSCRIPT).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

SCRIPT_NAMES = (
    "enqueue",
    "claim",
    "complete",
    "fail",
    "requeue",
    "promote",
    "reap",
    "heartbeat",
)


@cache
def script_source(name: str) -> str:
    """The text of ``taskscale/scripts/<name>.lua``."""
    return (resources.files("taskscale") / "scripts" / f"{name}.lua").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Scripts:
    """The runtime's scripts registered on one client."""

    enqueue: Script
    claim: Script
    complete: Script
    fail: Script
    requeue: Script
    promote: Script
    reap: Script
    heartbeat: Script


_registered: weakref.WeakKeyDictionary[Any, Scripts] = weakref.WeakKeyDictionary()


def scripts_for(client: redis.Redis) -> Scripts:
    """The scripts bound to ``client``, registered on first use."""
    found = _registered.get(client)
    if found is None:
        found = Scripts(
            **{name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}
        )
        _registered[client] = found
    return found
