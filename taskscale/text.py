"""Redis replies as text: the one bytes -> str conversion.

taskscale's clients never set ``decode_responses`` (task envelopes and claim
replies stay bytes on the hot path), so every module that reads a name, a
field or a status out of a reply turns it into ``str``.  Twelve modules kept
a private copy of that one line; this is the copy they share, so a reply
decodes the same way everywhere (UTF-8, strict unless the caller reads data
taskscale did not write).
"""

from __future__ import annotations

__all__ = ["as_text"]


def as_text(value: object, *, errors: str = "strict") -> str:
    """``value`` as ``str``: bytes decoded as UTF-8 (``errors`` as in
    :meth:`bytes.decode`, e.g. ``"replace"`` for another library's keys),
    anything else through ``str()`` (a ``str`` comes back as it is)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors)
    return str(value)
