"""A key of the wrong type: the one place the runtime reads and reports it.

Every script that writes checks the types of the keys it will write first
(``scripts/lib/key_types.lua``) and, when one is wrong (a string where a hash
belongs: a mistake by hand, another program sharing the server), writes
nothing and fails with ``BADKEY <key> is a <found>, not a <wanted>``.  This
module turns that error into a :class:`WrongKey` -- which key, and whose it
is: one task type's (``q:T:P``, ``stats:T``, ``delayed:T``, ``dead:T``,
``wake:T``, ``bucket:T``), one task's reply key, or the whole namespace's --
and :class:`WrongKeys` reports it (a log line naming the key, at most once a
``hold_s``; a counter) and holds back only what the key concerns: the worker
and the scheduler go on serving every other type (docs/operating.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import redis

from taskscale.keys import Keys

log = logging.getLogger("taskscale.keys")

#: The fixed start of the scripts' error.
BADKEY = "BADKEY "
#: Key kinds that belong to one task type: ``<kind>:<type>[:...]``.
PER_TYPE = frozenset({"q", "stats", "delayed", "dead", "wake", "bucket"})


@dataclass(frozen=True)
class WrongKey:
    """A key a script found of the wrong type."""

    key: str
    found: str
    wanted: str
    #: The task type whose key it is; None for a key of the namespace or a task.
    task_type: str | None = None
    #: A task's reply key (``{NS}:reply:<id>``): only that task's reply is lost.
    reply: bool = False

    def line(self) -> str:
        """The one line an operator reads."""
        whose = (
            f"task type {self.task_type} is held back until it is fixed"
            if self.task_type
            else "the reply to that task is dropped"
            if self.reply
            else "every task type waits until it is fixed"
        )
        return (
            f"key {self.key} is a {self.found} where taskscale keeps a {self.wanted}; "
            f"{whose} (delete or rename the key; docs/operating.md)"
        )


def wrong_key(exc: BaseException, keys: Keys) -> WrongKey | None:
    """The :class:`WrongKey` a script's ``BADKEY`` error names, else None."""
    if not isinstance(exc, redis.ResponseError):
        return None
    message = str(exc)
    start = message.find(BADKEY)
    if start < 0:
        return None
    key, _, rest = message[start + len(BADKEY) :].partition(" is a ")
    found, _, wanted = rest.partition(", not a ")
    task_type, reply = None, False
    if key.startswith(keys.prefix):
        kind, _, tail = key[len(keys.prefix) :].partition(":")
        if kind in PER_TYPE and tail:
            task_type = tail.split(":")[0] if kind == "q" else tail
        reply = kind == "reply"
    return WrongKey(key, found.strip(), wanted.strip(), task_type, reply)


class WrongKeys:
    """What one process knows of wrong-typed keys: reports each (a log line
    at most once every ``hold_s`` per key, ``count`` called every time) and
    says which types to hold back, for ``hold_s`` after each sighting (then
    the next script call checks again)."""

    def __init__(
        self,
        keys: Keys,
        *,
        who: str,
        hold_s: float = 5.0,
        count: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys = keys
        self.who = who
        self.hold_s = hold_s
        self._count = count
        self._clock = clock
        self._lock = threading.Lock()
        self._logged: dict[str, float] = {}
        self._types: dict[str, float] = {}
        self._everything = 0.0

    def seen(self, exc: BaseException) -> WrongKey | None:
        """Report the wrong key ``exc`` names and hold back what it concerns;
        None (nothing done) when ``exc`` is not a ``BADKEY`` error."""
        found = wrong_key(exc, self.keys)
        if found is None:
            return None
        now = self._clock()
        with self._lock:
            quiet = self._logged.get(found.key, -1e18) > now - self.hold_s
            if not quiet:
                self._logged[found.key] = now
            if found.task_type:
                self._types[found.task_type] = now + self.hold_s
            elif not found.reply:
                self._everything = now + self.hold_s
        if not quiet:
            log.error("%s: %s", self.who, found.line())
        if self._count is not None:
            self._count(found.key)
        return found

    def held(self, types: Iterable[str]) -> set[str]:
        """Of ``types``, those held back now (all of them while a namespace key is wrong)."""
        now = self._clock()
        with self._lock:
            if self._everything > now:
                return set(types)
            return {t for t in types if self._types.get(t, 0.0) > now}

    def wait_s(self) -> float:
        """Seconds until the namespace-wide hold ends (0 when there is none)."""
        return max(0.0, self._everything - self._clock())
