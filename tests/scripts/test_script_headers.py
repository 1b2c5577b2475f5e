"""Every script's header is a complete contract, in the one format.

The manifest (``taskscale scripts export``) and docs/schema.md take KEYS,
ARGV, the return value and the error texts from the headers
(taskscale/script_headers.py).  These tests fail when a header lacks one of
them, numbers its entries wrong, names a key of no known shape, or when a
script raises an error its header does not list (or lists one it never
raises).
"""

from __future__ import annotations

import re

import pytest

from taskscale.keys import KEY_SHAPES
from taskscale.luascripts import script_source
from taskscale.script_headers import (
    header,
    header_problems,
    parse_header,
    raised_fragments,
    script_names,
)


@pytest.mark.parametrize("name", script_names())
def test_every_script_has_a_complete_header(name: str) -> None:
    h = header(name)
    assert header_problems(h) == [], f"{name}.lua: {header_problems(h)}"
    assert h.name == name


def _skeleton(shape: str) -> str:
    """A key shape with its variable parts as ``*``: ``inflight:W`` and
    ``inflight:<worker>`` are both ``inflight:*``."""
    return ":".join("*" if re.fullmatch(r"[A-Z]|<\w+>", p) else p for p in shape.split(":"))


@pytest.mark.parametrize("name", script_names())
def test_every_namespaced_key_in_a_header_has_a_known_shape(name: str) -> None:
    known = {_skeleton(s) for s in KEY_SHAPES.values()}
    for slot in header(name).keys:
        if slot.key_shape is not None:
            shape = slot.key_shape.removeprefix("{ns}:")
            assert _skeleton(shape) in known, f"{name}.lua KEYS[{slot.index}]: {shape}"


def _in_order(fragments: tuple[str, ...], text: str) -> bool:
    at = 0
    for fragment in fragments:
        found = text.find(fragment, at)
        if found < 0:
            return False
        at = found + len(fragment)
    return True


@pytest.mark.parametrize("name", script_names())
def test_the_errors_a_script_raises_are_the_ones_its_header_lists(name: str) -> None:
    listed = header(name).errors
    raised = raised_fragments(script_source(name))
    for fragments in raised:
        assert fragments, f"{name}.lua raises an error with no literal text to list"
        assert any(_in_order(fragments, e) for e in listed), (
            f"{name}.lua raises {fragments!r}: add it to the header's Errors"
        )
    for error in listed:
        assert any(_in_order(f, error) for f in raised), (
            f"{name}.lua's header lists {error!r}, which the script never raises"
        )


def test_an_unlisted_error_is_caught() -> None:
    text = script_source("limits_set").replace(
        "are not a JSON object')",
        "are not a JSON object')\nlocal x = redis.error_reply('SOMETHING new')",
        1,
    )
    raised = raised_fragments(text)
    assert ("SOMETHING new",) in raised
    assert not any(_in_order(("SOMETHING new",), e) for e in header("limits_set").errors)


def test_a_wrapped_error_is_read_through_its_wrapper() -> None:
    raised = raised_fragments(script_source("schedule_add"))
    assert ("invalid schedule: ", 'catch_up must be "0" or "1"') in raised


GOOD = """\
-- demo: does a thing.
--
-- KEYS[1]  {ns}:types   set of task types
-- KEYS[2]  {ns}:limits  hash (optional)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2..] the envelopes, each
--          a JSON object
--
-- Returns 1.
--
-- Errors: `BAD <x> happened`
--! include lib/clock.lua
return 1
"""


def test_a_well_formed_header_is_read_entry_by_entry() -> None:
    h = parse_header("demo", GOOD)
    assert header_problems(h) == []
    assert h.summary == "does a thing."
    assert [(s.index, s.optional, s.key_shape) for s in h.keys] == [
        (1, False, "{ns}:types"),
        (2, True, "{ns}:limits"),
    ]
    assert h.keys[0].description == "set of task types"
    assert h.argv[1].variadic
    assert h.argv[1].text == "the envelopes, each a JSON object"
    assert h.returns == "Returns 1."
    assert h.errors == ("BAD <x> happened",)


@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (GOOD.replace("-- Returns 1.\n", ""), "no '-- Returns"),
        (GOOD.replace("-- Errors: `BAD <x> happened`\n", ""), "no '-- Errors:'"),
        (GOOD.replace("Errors: `BAD <x> happened`", "Errors: some"), "no '-- Errors:'"),
        (GOOD.replace("ARGV[2..]", "ARGV[3..]"), "ARGV[3] where ARGV[2] was expected"),
        (
            GOOD.replace("-- ARGV[2..] the envelopes", "-- ARGV[2..] x\n-- ARGV[3]  the"),
            "not the last",
        ),
        (
            GOOD.replace("hash (optional)", "hash").replace("task types", "(optional)"),
            "before a required",
        ),
        (GOOD.replace("-- KEYS[1]  {ns}:types   set of task types\n-- KEYS[2]", "-- KEYS[1]"), ""),
        ("return 1\n", "no first line"),
        (GOOD.replace("-- demo: does a thing.", "-- demo does a thing"), "no first line"),
    ],
)
def test_a_malformed_header_is_reported(broken: str, problem: str) -> None:
    problems = header_problems(parse_header("demo", broken))
    if problem:
        assert any(problem in p for p in problems), problems
    else:  # one key left: still complete
        assert problems == []


def test_errors_none_is_a_statement() -> None:
    h = parse_header("demo", GOOD.replace("`BAD <x> happened`", "none"))
    assert h.errors == () and h.errors_stated
