"""The Lua scripts that make every state change, loaded once per client.

Each change of queue state (enqueue, claim, complete, fail, requeue,
promote, reap, heartbeat) is one script in ``taskscale/scripts/*.lua`` so it
is atomic: a crash between two Redis commands cannot lose a task or skew a
counter.  This module is the only one that reads, registers or evaluates
script text: every caller gets its scripts from :func:`bound_script` (or
:func:`scripts_for`, the runtime's scripts as attributes), one
``register_script`` object per script and client.  The files are read once
per process; a script object calls EVALSHA and loads the script again by
itself after a Redis restart or ``SCRIPT FLUSH`` (NOSCRIPT).
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
#: logic several scripts share (the clock, stamping, fan-out accounting) is
#: written once; Redis still receives one self-contained script.  A library
#: is inlined once per script: a second include of it (a library including
#: another the script includes too) is left out.
_INCLUDE = re.compile(r"^--! include (lib/[a-z_]+\.lua)[ \t]*$", re.MULTILINE)

#: The scripts other languages load as plain files (docs/schema.md): they
#: hold their libraries as copies, each between ``--! inline lib/<name>.lua``
#: and ``--! end inline``, instead of include lines, so the file works as it
#: is.  The loader counts an inlined library as included; tests hold every
#: copy equal to its library and these files free of include lines.
STANDALONE = ("enqueue", "track_start", "track_stop", "track_sync")
_INLINE = re.compile(
    r"^--! inline (lib/[a-z_]+\.lua)[ \t]*\n(.*?)^--! end inline[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def _read(relative: str) -> str:
    return (resources.files("taskscale") / "scripts" / relative).read_text(encoding="utf-8")


def inline_copies(text: str) -> list[tuple[str, str]]:
    """The (library, copied text) of each inline block of ``text``."""
    return [(m.group(1), m.group(2).rstrip("\n")) for m in _INLINE.finditer(text)]


def library_text(name: str) -> str:
    """``lib/<name>.lua`` as a script receives it: its own includes expanded."""
    return expand_includes(_read(name)).rstrip("\n")


def expand_includes(text: str) -> str:
    """``text`` with its include lines replaced, each library once (a library
    may include another, or be inlined as a copy already).  Public for tests
    and tools that build a script."""
    done: set[str] = {name for name, _ in inline_copies(text)}

    def expand(text: str, depth: int) -> str:
        if depth > 4:
            raise ValueError("Lua includes nested more than 4 deep (a cycle?)")

        def inline(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in done:
                return f"-- ({name}: inlined above)"
            done.add(name)
            return expand(_read(name).rstrip("\n"), depth + 1)

        return _INCLUDE.sub(inline, text)

    return expand(text, 0)


@cache
def script_source(name: str) -> str:
    """The text of ``taskscale/scripts/<name>.lua`` with its includes expanded."""
    return expand_includes(_read(f"{name}.lua"))


class _ClientScripts:
    """The scripts registered on one client: each by name, and the runtime's
    gathered as a :class:`Scripts` once a caller asks for them."""

    __slots__ = ("by_name", "runtime")

    def __init__(self) -> None:
        self.by_name: dict[str, Script] = {}
        self.runtime: Scripts | None = None


#: The one cache of script objects, per client.
_bound: weakref.WeakKeyDictionary[Any, _ClientScripts] = weakref.WeakKeyDictionary()


def _scripts_of(client: RedisClient) -> _ClientScripts:
    found = _bound.get(client)
    if found is None:
        found = _bound[client] = _ClientScripts()
    return found


def bound_script(client: RedisClient, name: str) -> Script:
    """``taskscale/scripts/<name>.lua`` registered on ``client`` once (EVALSHA,
    reloaded after NOSCRIPT): every script of every caller comes from here."""
    by_name = _scripts_of(client).by_name
    script = by_name.get(name)
    if script is None:
        script = by_name[name] = client.register_script(script_source(name))
    return script


@dataclass(frozen=True)
class Scripts:
    """The runtime's scripts registered on one client, as attributes: the
    worker calls claim / complete / fail per batch, with no lookup."""

    enqueue: Script
    claim: Script
    complete: Script
    fail: Script
    requeue: Script
    promote: Script
    reap: Script
    heartbeat: Script
    scheduler_beat: Script


def scripts_for(client: RedisClient) -> Scripts:
    """The runtime's scripts bound to ``client`` (the objects :func:`bound_script`
    gives, kept with them), gathered on first use."""
    found = _bound.get(client)
    runtime = found.runtime if found is not None else None
    if runtime is None:
        runtime = Scripts(**{name: bound_script(client, name) for name in SCRIPT_NAMES})
        _scripts_of(client).runtime = runtime
    return runtime


def all_script_names() -> tuple[str, ...]:
    """Every script in ``taskscale/scripts`` (not its ``lib/``), sorted: the
    runtime's, the admin and console readers', the controller's."""
    folder = resources.files("taskscale") / "scripts"
    return tuple(
        sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".lua") and p.is_file())
    )


def script_file(name: str) -> str:
    """``taskscale/scripts/<name>.lua`` as written (include lines unexpanded):
    what its header says is read from here."""
    return _read(f"{name}.lua")


def exported_sources() -> dict[str, str]:
    """Every script by name as Redis receives it (:func:`script_source`), for
    ``taskscale scripts export`` (taskscale/contract.py): other languages load
    exactly the text the runtime registers."""
    return {name: script_source(name) for name in all_script_names()}
