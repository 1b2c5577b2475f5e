"""The header of every Lua script, read as data: the contract's one source.

Each ``taskscale/scripts/<name>.lua`` opens with a comment block that says
what the script takes and gives back.  Other languages call the scripts
directly (``taskscale scripts export``, docs/schema.md), so that header is a
contract; this module reads it in one structured format, so the manifest,
the docs and the tests all take KEYS, ARGV, the return value and the error
texts from the same lines and cannot drift apart.

The format (docs/schema.md, "Script headers"):

- the header is the leading run of ``--`` comment lines (after an optional
  ``#!lua`` line), ended by the first other line or ``--!`` directive;
- its first line is ``-- <name>: <summary>``;
- ``-- KEYS[i]  text`` and ``-- ARGV[i]  text`` are the entries, numbered
  1, 2, ... in order; ``[i..]`` is a variable tail (the rest, described by
  its text) and only the last entry may be one; an entry's text goes on over
  the following lines indented by two or more spaces after ``--``; text
  holding ``(optional`` marks an entry a caller may leave out (only at the
  end: an optional key is passed or not, the ones before it always are);
- the paragraph starting ``-- Returns`` is the return value;
- the paragraph starting ``-- Errors:`` lists the error replies the script
  raises itself, each between backticks with ``<placeholders>``, or says
  ``none``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from taskscale.luascripts import all_script_names, script_file

_ENTRY = re.compile(r"^(KEYS|ARGV)\[(\d+)(\s*\.\.\s*)?\]\s+(.*)$")
_KEY_SHAPE = re.compile(r"^\{ns\}:\S+", re.IGNORECASE)
_ERROR = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Slot:
    """One KEYS[i] or ARGV[i] entry of a header."""

    index: int
    variadic: bool
    optional: bool
    text: str

    @property
    def key_shape(self) -> str | None:
        """For a key: its shape with the namespace written ``{ns}:`` (``None``
        when the key is not one of the namespace's, e.g. another queue's)."""
        match = _KEY_SHAPE.match(self.text)
        return "{ns}:" + match.group(0)[5:] if match else None

    @property
    def description(self) -> str:
        """The text without the key shape it starts with (if it does)."""
        match = _KEY_SHAPE.match(self.text)
        return self.text[match.end() :].strip() if match else self.text


@dataclass(frozen=True)
class Header:
    """What one script's header says."""

    name: str
    summary: str
    keys: tuple[Slot, ...]
    argv: tuple[Slot, ...]
    returns: str
    errors: tuple[str, ...]
    #: ``Errors: none`` was written (distinguishes "none" from "not stated")
    errors_stated: bool


def header_lines(text: str) -> list[str]:
    """The header's comment lines, without the ``--`` and one following space."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    out: list[str] = []
    for line in lines:
        if not line.startswith("--") or line.startswith("--!"):
            break
        body = line[2:]
        out.append(body[1:] if body.startswith(" ") else body)
    return out


def _paragraphs(lines: list[str]) -> list[list[str]]:
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def _joined(lines: list[str]) -> str:
    return " ".join(" ".join(line.split()) for line in lines).strip()


def parse_header(name: str, text: str) -> Header:
    """The header of script ``name`` whose text is ``text``."""
    lines = header_lines(text)
    summary = lines[0].split(":", 1)[1].strip() if lines and ":" in lines[0] else ""
    slots: dict[str, list[Slot]] = {"KEYS": [], "ARGV": []}
    current: tuple[str, int, bool, list[str]] | None = None

    def close() -> None:
        if current is not None:
            kind, index, variadic, parts = current
            body = _joined(parts)
            slots[kind].append(Slot(index, variadic, "(optional" in body, body))

    for line in lines:
        entry = _ENTRY.match(line)
        if entry:
            close()
            current = (entry[1], int(entry[2]), bool(entry[3]), [entry[4]])
        elif current is not None and line.startswith("  ") and line.strip():
            current[3].append(line)
        else:
            close()
            current = None
    close()

    returns = ""
    errors: tuple[str, ...] = ()
    errors_stated = False
    for paragraph in _paragraphs(lines):
        starts = [i for i, line in enumerate(paragraph) if line.startswith("Returns")]
        if starts and not returns:
            returns = _joined(paragraph[starts[0] :])
        if paragraph[0].startswith("Errors:"):
            body = _joined(paragraph)
            errors = tuple(_ERROR.findall(body))
            errors_stated = bool(errors) or body == "Errors: none"
    return Header(
        name=name,
        summary=summary,
        keys=tuple(slots["KEYS"]),
        argv=tuple(slots["ARGV"]),
        returns=returns,
        errors=errors,
        errors_stated=errors_stated,
    )


def header(name: str) -> Header:
    """The header of ``taskscale/scripts/<name>.lua``."""
    return parse_header(name, script_file(name))


def header_problems(h: Header) -> list[str]:
    """What ``h`` lacks to be a complete contract (empty: complete)."""
    problems: list[str] = []
    if not h.summary:
        problems.append("no first line '-- <name>: <summary>'")
    for kind, slots in (("KEYS", h.keys), ("ARGV", h.argv)):
        for position, slot in enumerate(slots, 1):
            if slot.index != position:
                problems.append(f"{kind}[{slot.index}] where {kind}[{position}] was expected")
            if slot.variadic and position != len(slots):
                problems.append(f"{kind}[{slot.index}..] is not the last entry")
            if not slot.text:
                problems.append(f"{kind}[{slot.index}] has no text")
        required_after = [s.index for s in slots if not s.optional]
        for slot in slots:
            if slot.optional and required_after and max(required_after) > slot.index:
                problems.append(f"optional {kind}[{slot.index}] before a required one")
    if not h.keys:
        problems.append("no KEYS[1] entry (every script takes a key that routes it)")
    if not h.returns:
        problems.append("no '-- Returns ...' paragraph")
    if not h.errors_stated:
        problems.append("no '-- Errors:' paragraph (backticked texts, or 'none')")
    return problems


_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_WRAPPER = re.compile(
    r"local function (\w+)\(\w+\)\s*\n\s*return redis\.error_reply\(([^\n]*)\)\s*\n\s*end"
)


def _call_arguments(text: str, function: str) -> list[str]:
    """The argument text of every one-line call ``function(...)`` in ``text``."""
    found = []
    for match in re.finditer(rf"(?<![\w.]){re.escape(function)}\((.*)\)\s*$", text, re.M):
        found.append(match.group(1))
    return found


def raised_fragments(text: str) -> list[tuple[str, ...]]:
    """The string literals of each error a script (its includes expanded)
    raises: one tuple per ``redis.error_reply(...)`` call, or per call of a
    local function that only wraps one (``invalid(reason)``), its literals
    joined to the wrapper's.  A call with no literal at all gives ``()``."""
    calls: list[tuple[str, ...]] = []
    wrappers = {m.group(1): m.group(2) for m in _WRAPPER.finditer(text)}
    body = _WRAPPER.sub("", text)
    for function, head in [("redis.error_reply", ""), *wrappers.items()]:
        for arguments in _call_arguments(body, function):
            literals = [_unescape(a or b) for a, b in _LITERAL.findall(head + " " + arguments)]
            calls.append(tuple(s for s in literals if s.strip()))
    return calls


def _unescape(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal)


def script_names() -> tuple[str, ...]:
    """Every script that has a header to read (all of ``taskscale/scripts``)."""
    return all_script_names()
