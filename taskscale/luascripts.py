"""The Lua scripts that make every state change, loaded once per client.

Each change of queue state (enqueue, claim, complete, fail, requeue,
promote, reap, heartbeat) is one script in ``taskscale/scripts/*.lua`` so it
is atomic: a crash between two Redis commands cannot lose a task or skew a
counter.  The files are read once per process; each client gets
``register_script`` objects, which call EVALSHA and load the script again
by themselves after a Redis restart (NOSCRIPT).
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import Script

from taskscale.redis_urls import RedisClient

SCRIPT_NAMES = (
    "enqueue",
    "claim",
    "complete",
    "fail",
    "requeue",
    "promote",
    "reap",
    "heartbeat",
    "scheduler_beat",
)


#: A line ``--! include lib/<name>.lua`` is replaced by that file's text, so
#: logic two scripts share (fan-out accounting) is written once; Redis still
#: receives one self-contained script.
_INCLUDE = re.compile(r"^--! include (lib/[a-z_]+\.lua)[ \t]*$", re.MULTILINE)


def _read(relative: str) -> str:
    return (resources.files("taskscale") / "scripts" / relative).read_text(encoding="utf-8")


def _expand(text: str, depth: int = 0) -> str:
    """``text`` with its include lines replaced (a library may include another)."""
    if depth > 4:
        raise ValueError("Lua includes nested more than 4 deep (a cycle?)")
    return _INCLUDE.sub(lambda m: _expand(_read(m.group(1)).rstrip("\n"), depth + 1), text)


@cache
def script_source(name: str) -> str:
    """The text of ``taskscale/scripts/<name>.lua`` with its includes expanded."""
    return _expand(_read(f"{name}.lua"))


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
    scheduler_beat: Script


_registered: weakref.WeakKeyDictionary[Any, Scripts] = weakref.WeakKeyDictionary()


def scripts_for(client: RedisClient) -> Scripts:
    """The scripts bound to ``client``, registered on first use."""
    found = _registered.get(client)
    if found is None:
        found = Scripts(
            **{name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}
        )
        _registered[client] = found
    return found


_bound: weakref.WeakKeyDictionary[Any, dict[str, Script]] = weakref.WeakKeyDictionary()


def bound_script(client: RedisClient, name: str) -> Script:
    """``taskscale/scripts/<name>.lua`` registered on ``client`` once (EVALSHA,
    reloaded after NOSCRIPT): the scripts outside :class:`Scripts` -- admin,
    cancel, fan-out, catalog, limits, schedules -- share this one cache."""
    found = _bound.setdefault(client, {})
    if name not in found:
        found[name] = client.register_script(script_source(name))
    return found[name]
