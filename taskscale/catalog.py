"""The task catalog: what the live workers can run, and how to call it.

A producer -- a person at the dashboard, or code in another language --
needs more than a type name to enqueue a task: the function behind it, its
parameters, what it does.  Each worker describes the types it serves
(:func:`describe_task`: qualified name, parameters with kind, annotation text
and JSON default, the docstring's first paragraph, the module's version) and
publishes that document under ``{ns}:catalog:W`` with ``catalog.lua``: in
full at start, then as a digest with every heartbeat, with the lease as TTL.
A worker that dies stops refreshing it and its types drop out by themselves.

:func:`read_catalog` merges the live workers' documents per type and flags
the types that were enqueued but that no live worker serves (or serves
without a registered function).  Schema: docs/schema.md, "The task catalog".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import sys
from collections.abc import Sequence
from functools import cache
from typing import Any

from redis.commands.core import Script

from taskscale.keys import Keys
from taskscale.luascripts import bound_script
from taskscale.redis_urls import RedisClient
from taskscale.server_clock import server_time
from taskscale.tasks import TaskFunction, TaskRegistry
from taskscale.text import as_text

#: Version of the document layout (a reader skips documents it doesn't know).
CATALOG_FORMAT = 1


def _script(client: RedisClient) -> Script:
    return bound_script(client, "catalog")


@cache
def module_version(module_name: str) -> str | None:
    """The top-level package's ``__version__``, else the version of the
    installed distribution of the same name; None if neither is known.

    (Not ``packages_distributions()``: it scans every installed distribution,
    0.6 s in a controller venv, on each worker's start.)"""
    top = module_name.partition(".")[0]
    found = getattr(sys.modules.get(top), "__version__", None)
    if isinstance(found, str):
        return found
    try:
        return importlib.metadata.version(top)
    except (importlib.metadata.PackageNotFoundError, OSError, ValueError):
        return None


def _annotation(annotation: Any) -> str | None:
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):  # `from __future__ import annotations`
        return annotation
    return inspect.formatannotation(annotation)


def describe_parameter(param: inspect.Parameter) -> dict[str, Any]:
    """``{"name", "kind", "annotation"?, "default"? | "default_repr"?}``.

    ``kind`` is ``positional_only``, ``positional_or_keyword``,
    ``var_positional``, ``keyword_only`` or ``var_keyword``; ``default`` is
    present when the parameter has one that JSON can carry, ``default_repr``
    when it has one that JSON can't.
    """
    out: dict[str, Any] = {"name": param.name, "kind": param.kind.name.lower()}
    annotation = _annotation(param.annotation)
    if annotation is not None:
        out["annotation"] = annotation
    if param.default is not inspect.Parameter.empty:
        try:
            json.dumps(param.default, allow_nan=False)
            out["default"] = param.default
        except (TypeError, ValueError):
            out["default_repr"] = repr(param.default)
    return out


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line ("" when there is none)."""
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def describe_task(task_type: str, fn: TaskFunction | None) -> dict[str, Any]:
    """The catalog entry of one task type served by this process."""
    if fn is None:
        return {"type": task_type, "registered": False}
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    entry: dict[str, Any] = {
        "type": task_type,
        "registered": True,
        "function": f"{module}.{qualname}" if module else qualname,
        "doc": first_paragraph(inspect.getdoc(fn)),
        "version": module_version(module) if module else None,
        "async": inspect.iscoroutinefunction(fn),
    }
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function without a signature
        entry["params"], entry["returns"] = None, None
        return entry
    entry["params"] = [describe_parameter(p) for p in signature.parameters.values()]
    entry["returns"] = _annotation(signature.return_annotation)
    return entry


def worker_document(registry: TaskRegistry, types: Sequence[str]) -> dict[str, Any]:
    """What one worker publishes: ``{"format": 1, "types": {T: entry}}``."""
    return {
        "format": CATALOG_FORMAT,
        "types": {t: describe_task(t, registry.get(t)) for t in types},
    }


class CatalogPublisher:
    """Keeps one worker's catalog entry in Redis (call :meth:`publish` with
    each heartbeat: the document is sent in full only when Redis lacks it)."""

    def __init__(
        self,
        client: RedisClient,
        keys: Keys,
        worker_id: str,
        registry: TaskRegistry,
        types: Sequence[str],
        *,
        lease_s: float,
    ) -> None:
        self._client = client
        self._key = keys.catalog(worker_id)
        self._registry = registry
        self._types = tuple(types)
        self._lease_ms = max(1, round(lease_s * 1000))
        self._doc = ""
        self._digest = ""

    def publish(self) -> None:
        """Refresh the entry's TTL; write the document if it is missing or stale."""
        if not self._doc:
            doc = worker_document(self._registry, self._types)
            self._doc = json.dumps(doc, sort_keys=True, separators=(",", ":"))
            self._digest = hashlib.sha1(self._doc.encode()).hexdigest()
            self._call(self._doc)
            return
        if not int(self._call("")):
            self._call(self._doc)

    def _call(self, doc: str) -> Any:
        return _script(self._client)(
            keys=[self._key], args=[self._lease_ms, self._digest, doc], client=self._client
        )


def read_catalog(client: RedisClient, keys: Keys) -> dict[str, Any]:
    """Every type a live worker serves or that was ever enqueued, merged.

    ``{"types": {T: {...entry, "workers": [W...], "served": bool,
    "enqueued": bool, "variants": n}}, "unserved": [T...], "now": unix s}``.
    ``served`` is false for a type enqueued that no live worker serves with a
    registered function; ``variants`` > 1 when live workers describe a type
    differently (a rolling deploy with a changed signature).
    """
    pipe = client.pipeline(transaction=False)
    pipe.zrange(keys.workers, 0, -1, withscores=True)
    pipe.smembers(keys.types)
    members, enqueued_raw = pipe.execute()
    now = server_time(client, keys)
    now_ms = now.ms
    live = sorted(as_text(w) for w, lease in members if lease > now_ms)
    pipe = client.pipeline(transaction=False)
    for worker_id in live:
        pipe.hget(keys.catalog(worker_id), "doc")
    docs = pipe.execute() if live else []
    enqueued = {as_text(t) for t in enqueued_raw}
    types: dict[str, dict[str, Any]] = {}
    # each type's distinct descriptions, compared as decoded (a list: there
    # are one or two, and comparing is cheaper than encoding each again)
    shapes: dict[str, list[dict[str, Any]]] = {}
    for worker_id, raw in zip(live, docs, strict=True):
        for name, entry in _entries(raw):
            merged = types.setdefault(name, {**entry, "workers": []})
            if entry.get("registered") and not merged.get("registered"):
                merged.update(entry)  # prefer a worker that can run it
            merged["workers"].append(worker_id)
            seen = shapes.setdefault(name, [])
            if entry not in seen:
                seen.append(entry)
    for name in enqueued - types.keys():
        types[name] = {"type": name, "registered": False, "workers": []}
    for name, merged in types.items():
        merged["served"] = bool(merged["workers"]) and bool(merged.get("registered"))
        merged["enqueued"] = name in enqueued
        merged["variants"] = len(shapes.get(name, ()))
    ordered = {name: types[name] for name in sorted(types)}
    unserved = [n for n, t in ordered.items() if t["enqueued"] and not t["served"]]
    return {"now": now.unix_s, "types": ordered, "unserved": unserved}


def _entries(raw: Any) -> list[tuple[str, dict[str, Any]]]:
    if raw is None:
        return []
    try:
        doc = json.loads(as_text(raw))
    except ValueError:
        return []
    if not isinstance(doc, dict) or doc.get("format") != CATALOG_FORMAT:
        return []
    found = doc.get("types")
    if not isinstance(found, dict):
        return []
    return [(str(n), e) for n, e in found.items() if isinstance(e, dict)]


def signature_text(entry: dict[str, Any]) -> str:
    """``(seconds: float = 1.0) -> float`` from a catalog entry's parameters."""
    params = entry.get("params")
    if params is None:
        return "(...)" if entry.get("registered") else "(no function registered)"
    parts: list[str] = []
    marked_kw = False
    for p in params:
        kind = p.get("kind", "")
        if kind == "keyword_only" and not marked_kw:
            parts.append("*")
        marked_kw = marked_kw or kind in ("keyword_only", "var_positional")
        star = {"var_positional": "*", "var_keyword": "**"}.get(kind, "")
        text = star + str(p.get("name", "?"))
        if "annotation" in p:
            text += f": {p['annotation']}"
        if "default" in p:
            text += f" = {json.dumps(p['default'])}"
        elif "default_repr" in p:
            text += f" = {p['default_repr']}"
        parts.append(text)
    returns = f" -> {entry['returns']}" if entry.get("returns") else ""
    return "(" + ", ".join(parts) + ")" + returns
