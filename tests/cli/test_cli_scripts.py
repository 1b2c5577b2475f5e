"""``taskscale scripts export|doc``: bad paths and documents are one line, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskscale.cli import main
from taskscale.contract import BEGIN, END, render_reference


def test_export_into_a_file_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "taken"
    target.write_text("a file, not a directory")
    assert main(["scripts", "export", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("taskscale scripts export: ") and str(target) in err


def test_doc_update_of_a_document_without_markers_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "schema.md"
    doc.write_text(f"# schema\n{BEGIN}\nno end marker\n")
    assert main(["scripts", "doc", "--update", str(doc)]) == 2
    assert "no generated part" in capsys.readouterr().err
    assert doc.read_text() == f"# schema\n{BEGIN}\nno end marker\n"


def test_doc_update_of_a_missing_file_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scripts", "doc", "--update", str(tmp_path / "absent.md")]) == 1
    assert capsys.readouterr().err.startswith("taskscale scripts doc: ")


def test_doc_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scripts", "doc"]) == 0
    out = capsys.readouterr().out
    assert out == render_reference() + "\n" and out.rstrip().endswith(END)


def test_scripts_needs_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["scripts"])
    assert exit_.value.code == 2
