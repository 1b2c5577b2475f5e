"""The scripts as a contract for other languages: the schema version and the export.

A producer or worker in another language calls the same Lua scripts the
Python runtime does.  ``taskscale scripts export DIR`` writes each script as
Redis receives it (includes expanded by :mod:`taskscale.luascripts`, the one
loader) plus ``manifest.json``: per script its SHA1 (what ``SCRIPT LOAD``
returns), KEYS, ARGV, return value and error texts as the script's header
states them (:mod:`taskscale.script_headers`).  docs/schema.md, "Calling the
scripts from another language", is the reader's side.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from taskscale import __version__
from taskscale.luascripts import exported_sources
from taskscale.script_headers import Header, Slot, header

#: The version of the Redis contract: key layout, envelope fields, and each
#: script's KEYS / ARGV order and reply shape.  Raised on any incompatible
#: change (a key or ARGV moved, removed or re-typed, a reply reshaped, a key
#: renamed): a client built against another version must not call the
#: scripts.  Compatible additions (a new optional trailing KEYS / ARGV, a new
#: script, a new envelope field old workers ignore, a new error text) keep it.
#: It lives in the manifest and docs/schema.md only, not in Redis: a key the
#: workers wrote would flip back and forth during a rolling upgrade, and a
#: producer-only deployment has no worker to write it.
SCHEMA_VERSION = 1

MANIFEST = "manifest.json"


def _slot(slot: Slot, *, key: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": slot.index,
        "variadic": slot.variadic,
        "optional": slot.optional,
    }
    if key:
        entry["key"] = slot.key_shape
    entry["text"] = slot.description if key else slot.text
    return entry


def manifest_entry(h: Header, text: str) -> dict[str, Any]:
    """One script's manifest row: ``text`` is the script as exported."""
    return {
        "name": h.name,
        "file": f"{h.name}.lua",
        "sha1": hashlib.sha1(text.encode("utf-8")).hexdigest(),
        "summary": h.summary,
        "keys": [_slot(s, key=True) for s in h.keys],
        "argv": [_slot(s, key=False) for s in h.argv],
        "returns": h.returns,
        "errors": list(h.errors),
    }


def manifest() -> dict[str, Any]:
    """The manifest of every script, without writing anything."""
    return {
        "schema_version": SCHEMA_VERSION,
        "taskscale_version": __version__,
        "scripts": [manifest_entry(header(n), text) for n, text in exported_sources().items()],
    }


def export(directory: Path) -> dict[str, Any]:
    """Write every script (includes expanded) and ``manifest.json`` into
    ``directory`` (created if missing; files of the same names replaced).
    Returns the manifest written."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in exported_sources().items():
        (directory / f"{name}.lua").write_bytes(text.encode("utf-8"))
    written = manifest()
    (directory / MANIFEST).write_text(
        json.dumps(written, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return written
