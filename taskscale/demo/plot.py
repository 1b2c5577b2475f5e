"""``taskscale demo``'s plot: arrivals, queue and replicas over the run, as an
SVG any browser opens.

Written by hand, with no plotting library: matplotlib and numpy were most of
what ``make demo`` downloaded and installed on a fresh clone (issue 26: 11 s
of its 16 s of pip on an idle machine, far more on a busy one), for three
panels of lines and bars.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from html import escape
from pathlib import Path

from taskscale.demo.load import TASK_TYPE, DemoSettings, LoadPlan
from taskscale.demo.report import RunResult

WIDTH, PANEL_H, LEFT, RIGHT, TOP, GAP = 900, 190, 60, 20, 40, 40
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c")


def write_plot(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> None:
    """Write the plot and say where; a plot that can't be written is one line."""
    if not result.samples:
        return
    try:
        path = plot(result, plan, settings)
    except (OSError, ValueError) as exc:  # unwritable, or not an .svg name
        print(f"no plot: cannot write {str(settings.out)!r}: {exc}", file=sys.stderr)
        return
    print(f"plot written to {path}")


def plot(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> Path:
    """Load, queue, active and replicas over time, as an SVG file."""
    if settings.out.suffix.lower() != ".svg":
        raise ValueError("the plot is an SVG image: name it *.svg")
    samples = result.samples
    t = [s.t for s in samples]
    end = max(t[-1], 1.0)
    load = result.arrivals.per_second(len(samples))
    due = plan.spike.due_at_s
    panels = (
        ("arrivals / s", [("arrivals/s", [float(i) for i in range(len(load))], load, "bar")]),
        (
            "tasks",
            [
                ("queued + due", t, [s.queued + s.due for s in samples], "line"),
                ("active", t, [s.active for s in samples], "line"),
                ("delayed within lead", t, [s.upcoming for s in samples], "dash"),
            ],
        ),
        (
            "replicas",
            [
                ("replicas", t, [s.replicas for s in samples], "step"),
                ("desired", t, [s.desired for s in samples], "stepdash"),
            ],
        ),
    )
    height = TOP + 3 * (PANEL_H + GAP)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="13">'
        + escape(
            f"taskscale demo: '{TASK_TYPE}' tasks, {settings.threads} per replica; delayed "
            f"spike due at {due:.0f} s (shaded: warm-up lead)"
        )
        + "</text>",
    ]
    for i, (label, series) in enumerate(panels):
        top = TOP + i * (PANEL_H + GAP)
        peak = max((max(ys, default=0) for _, _, ys, _ in series), default=0)
        if i == 2:
            peak = max(peak, settings.max_replicas)
        panel = _Panel(top, end, max(float(peak), 1.0))
        out += panel.frame(label, due, settings.warmup_lead_s, last=i == 2)
        for n, (name, xs, ys, kind) in enumerate(series):
            color = "#8aa" if kind == "bar" else COLORS[n]
            out.append(panel.series(xs, ys, kind, color))
            out.append(panel.legend(n, name, color))
        if i == 2:
            out += _from_zero_marks(panel, result)
    out.append("</svg>")
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text("\n".join(out) + "\n", encoding="utf-8")
    return settings.out


def _from_zero_marks(panel: _Panel, result: RunResult) -> list[str]:
    """Each scale-up from zero: decided (triangle) and its first task (dot)."""
    out = []
    for decided, first in result.from_zero:
        x, y = panel.x(decided), panel.y(0)
        out.append(f'<path d="M{x - 5:.1f},{y - 9:.1f}h10l-5,8z" fill="#c60"/>')
        if first is not None:
            out.append(f'<circle cx="{panel.x(first):.1f}" cy="{y - 4:.1f}" r="4" fill="#282"/>')
    if result.from_zero:
        out.append(panel.legend(3, "decided from 0 (v), first task ran (o)", "#c60"))
    return out


class _Panel:
    """One panel's coordinates: seconds 0..end across, 0..peak up."""

    def __init__(self, top: float, end: float, peak: float) -> None:
        self.top, self.end, self.peak = top, end, peak * 1.08
        self.w = WIDTH - LEFT - RIGHT

    def x(self, t: float) -> float:
        return LEFT + self.w * min(max(t, 0.0), self.end) / self.end

    def y(self, v: float) -> float:
        return self.top + PANEL_H * (1 - v / self.peak)

    def frame(self, label: str, due: float, lead: float, *, last: bool) -> list[str]:
        bottom = self.top + PANEL_H
        out = [
            f'<rect x="{self.x(due - lead):.1f}" y="{self.top}" width="'
            f'{self.x(due) - self.x(due - lead):.1f}" height="{PANEL_H}" fill="#fdd"/>',
            f'<rect x="{LEFT}" y="{self.top}" width="{self.w}" height="{PANEL_H}" '
            'fill="none" stroke="#888"/>',
            f'<line x1="{self.x(due):.1f}" x2="{self.x(due):.1f}" y1="{self.top}" '
            f'y2="{bottom}" stroke="#c44" stroke-dasharray="2,3"/>',
            f'<text x="14" y="{self.top + PANEL_H / 2}" transform="rotate(-90 14 '
            f'{self.top + PANEL_H / 2})" text-anchor="middle">{escape(label)}</text>',
        ]
        for frac in (0.0, 0.5, 1.0):
            value = self.peak / 1.08 * frac
            out.append(
                f'<text x="{LEFT - 4}" y="{self.y(value) + 4:.1f}" text-anchor="end">'
                f"{value:.0f}</text>"
            )
        step = 10 if self.end <= 150 else 30
        for s in range(0, int(self.end) + 1, step):
            out.append(
                f'<line x1="{self.x(s):.1f}" x2="{self.x(s):.1f}" y1="{self.top}" '
                f'y2="{bottom}" stroke="#eee"/>'
            )
            if last:
                out.append(
                    f'<text x="{self.x(s):.1f}" y="{bottom + 14}" text-anchor="middle">{s}</text>'
                )
        if last:
            out.append(f'<text x="{LEFT + self.w / 2}" y="{bottom + 30}">seconds</text>')
        return out

    def series(self, xs: Sequence[float], ys: Sequence[float], kind: str, color: str) -> str:
        if kind == "bar":
            return "".join(
                f'<rect x="{self.x(x):.1f}" y="{self.y(v):.1f}" width="'
                f'{max(self.x(x + 1) - self.x(x) - 0.5, 0.5):.1f}" height="'
                f'{self.y(0) - self.y(v):.1f}" fill="#8aa"/>'
                for x, v in zip(xs, ys, strict=False)
                if v
            )
        points: list[tuple[float, float]] = []
        for x, v in zip(xs, ys, strict=False):
            if kind.startswith("step") and points:
                points.append((self.x(x), points[-1][1]))
            points.append((self.x(x), self.y(v)))
        dash = ' stroke-dasharray="6,4"' if kind.endswith("dash") else ""
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        return f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"{dash}/>'

    def legend(self, n: int, name: str, color: str) -> str:
        x, y = WIDTH - RIGHT - 230, self.top + 14 + 14 * n
        return (
            f'<line x1="{x}" x2="{x + 18}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" '
            f'stroke-width="3"/><text x="{x + 24}" y="{y}">{escape(name)}</text>'
        )
