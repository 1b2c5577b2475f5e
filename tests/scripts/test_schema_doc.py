"""docs/schema.md's script reference is the scripts' headers, as generated.

The reference (between the markers of ``taskscale.contract``) is written by
``taskscale scripts doc --update docs/schema.md``; these tests fail when a
header changed and the document was not regenerated, when a script is in no
group of the reference, and when the prose that names scripts or the schema
version by hand disagrees with the headers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskscale.cli import main
from taskscale.contract import (
    BEGIN,
    END,
    GROUPS,
    SCHEMA_VERSION,
    render_reference,
    takes_prefix,
    with_reference,
)
from taskscale.script_headers import header, script_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"


def test_the_reference_in_docs_schema_md_is_the_generated_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert with_reference(text) == text, (
        "docs/schema.md's script reference differs from the script headers: "
        "run `python -m taskscale.cli scripts doc --update docs/schema.md`"
    )


def test_every_script_is_in_exactly_one_group() -> None:
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(script_names())


@pytest.mark.parametrize("name", script_names())
def test_the_reference_gives_every_keys_and_argv_entry_of_a_script(name: str) -> None:
    reference = render_reference()
    section = reference.split(f"#### `{name}`\n", 1)[1].split("#### ", 1)[0]
    h = header(name)
    for kind, slots in (("KEYS", h.keys), ("ARGV", h.argv)):
        for slot in slots:
            row = f"| {kind}[{slot.index}{'..' if slot.variadic else ''}] |"
            assert row in section, f"{name}: {row}"
    for error in h.errors:
        assert f"- `{error}`" in section


def test_a_changed_header_puts_the_doc_out_of_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text(encoding="utf-8")
    edited = text.replace(
        "| KEYS[1] | `{ns}:types` | set of every task type ever", "| KEYS[1] | x |", 1
    )
    assert edited != text
    assert with_reference(edited) == text  # regenerating restores it


def test_scripts_doc_update_rewrites_the_generated_part_only(tmp_path: Path) -> None:
    copy = tmp_path / "schema.md"
    copy.write_text(f"# intro\n\n{BEGIN}\nstale\n{END}\n\n## after\n", encoding="utf-8")
    assert main(["scripts", "doc", "--update", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == f"# intro\n\n{render_reference()}\n\n## after\n"


def test_the_scripts_the_prose_says_take_no_prefix_are_the_ones_that_do_not() -> None:
    text = DOC.read_text(encoding="utf-8")
    paragraph = text.split("Most take the key prefix", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", paragraph))
    assert named == {n for n in script_names() if not takes_prefix(header(n))}


def test_the_schema_version_the_doc_states_is_the_code_s() -> None:
    text = DOC.read_text(encoding="utf-8")
    stated = re.search(r"`taskscale/contract.py`; \*\*(\d+)\*\* today", text)
    assert stated is not None and int(stated.group(1)) == SCHEMA_VERSION
    assert f"Schema version **{SCHEMA_VERSION}**" in text
