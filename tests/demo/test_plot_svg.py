"""The demo's plot is an SVG written without a plotting library (issue 26:
matplotlib and numpy were most of what `make demo` installed), and it still
shows what the demo is about: the load, the queue, the replicas reaching
zero, the delayed spike with its warm-up lead, and each start from zero."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from taskscale.demo.load import Arrivals, DemoSettings, plan_load
from taskscale.demo.plot import write_plot
from taskscale.demo.report import RunResult, Sample

SVG = "{http://www.w3.org/2000/svg}"


def result(tmp_path: Path) -> RunResult:
    replicas = [0, 0, 2, 4, 4, 3, 1, 0, 0, 0]
    samples = [
        Sample(float(t), queued=8 - t if t < 8 else 0, due=0, upcoming=t % 3, active=min(t, 4),
               replicas=r, desired=r, reason_code="Demand")
        for t, r in enumerate(replicas)
    ]  # fmt: skip
    arrivals = Arrivals(ready=[(0.5, 6), (1.2, 3)], delayed=[(6.0, 5)])
    return RunResult(samples, arrivals, 14, 0, 4, [0.1], 0, False, tmp_path, [(1.0, 3.0)])


def test_the_plot_is_an_svg_with_the_three_panels_and_the_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = DemoSettings(out=tmp_path / "sub" / "demo.svg")
    write_plot(result(tmp_path), plan_load(settings), settings)

    assert capsys.readouterr().out.strip() == f"plot written to {settings.out}"
    root = ET.parse(settings.out).getroot()  # well-formed XML
    assert root.tag == SVG + "svg"
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    for label in ("arrivals / s", "tasks", "replicas", "seconds", "queued + due", "desired"):
        assert label in texts
    assert any("delayed spike due at" in t for t in texts)
    lines = root.findall(SVG + "polyline")
    assert len(lines) == 5  # queued + due, active, upcoming; replicas, desired
    # the replicas' step line: 10 samples, each after the first drawn as a step (2 points)
    assert len(lines[3].get("points", "").split()) == 1 + 2 * 9
    bars = [r for r in root.iter(SVG + "rect") if r.get("fill") == "#8aa"]
    assert len(bars) == 3  # seconds 0 and 1 (ready), 6 (the delayed ones come due)
    assert len(root.findall(SVG + "circle")) == 1  # the first task after the start from 0
    assert len([p for p in root.findall(SVG + "path") if p.get("fill") == "#c60"]) == 1


def test_a_name_other_than_svg_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = DemoSettings(out=tmp_path / "demo.png")
    write_plot(result(tmp_path), plan_load(settings), settings)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert (
        line
        == f"no plot: cannot write {str(settings.out)!r}: the plot is an SVG image: name it *.svg"
    )
    assert not settings.out.exists()


def test_the_demo_imports_no_plotting_library() -> None:
    code = (
        "import sys, taskscale.demo.run, taskscale.demo.plot; "
        "print(','.join(m for m in ('matplotlib', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""
