"""Small inline SVG line charts for the console's history page: drawn on the
server from the rows, so the page needs no script and no CDN (and a test can
read the numbers a chart shows from its markup)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD = 720, 150, 40


def _scale(top: float) -> float:
    """A round ceiling for the y axis (1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return 1.0
    power = math.pow(10, math.floor(math.log10(top)))
    for step in (1, 2, 5, 10):
        if top <= step * power:
            return float(step * power)
    return float(10 * power)


def _clock(at: Any) -> str:
    """A bucket's start (unix seconds) as HH:MM UTC."""
    if not isinstance(at, int | float):
        return ""
    return time.strftime("%H:%M", time.gmtime(at)) + "Z"


def line_chart(
    rows: Sequence[dict[str, Any]],
    series: Sequence[tuple[str, str, str]],
    *,
    title: str,
    per: float = 1.0,
) -> Markup:
    """An SVG chart of ``rows`` (oldest first), one polyline per
    ``(field, label, css class)``; values divided by ``per`` (10 -> per second
    of a 10 s bucket); a missing value (None) breaks the line."""
    n = max(1, len(rows) - 1)
    values = {f: [None if r.get(f) is None else r[f] / per for r in rows] for f, _, _ in series}
    top = _scale(max((v for vs in values.values() for v in vs if v is not None), default=0))
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD

    def point(i: int, v: float) -> str:
        return f"{PAD + inner_w * i / n:.1f},{PAD + inner_h * (1 - v / top):.1f}"

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" data-top="{top:g}">',
        f'<text x="{PAD}" y="14" class="chart-title">{escape(title)}</text>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" '
        f'y2="{HEIGHT - PAD}" class="axis"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{WIDTH - PAD}" y2="{PAD}" class="grid-line"/>',
        f'<text x="{PAD - 4}" y="{PAD + 4}" class="tick" text-anchor="end">{top:g}</text>',
        f'<text x="{PAD - 4}" y="{HEIGHT - PAD + 4}" class="tick" text-anchor="end">0</text>',
    ]
    if rows:
        first, last = _clock(rows[0].get("at")), _clock(rows[-1].get("at"))
        parts.append(f'<text x="{PAD}" y="{HEIGHT - 8}" class="tick">{first}</text>')
        parts.append(
            f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" class="tick" text-anchor="end">{last}</text>'
        )
    for x, (field, label, css) in enumerate(series):
        runs: list[list[str]] = [[]]
        dots: list[str] = []
        for i, v in enumerate(values[field]):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(point(i, v))
                if v:
                    dots.append(point(i, v))
        total = sum(v for v in values[field] if v is not None)
        for run in runs:
            if len(run) > 1:
                parts.append(
                    f'<polyline class="{css}" data-field="{escape(field)}" '
                    f'points="{" ".join(run)}"/>'
                )
        for dot in dots[:: max(1, len(dots) // 200)]:  # every non-zero point, a few hundred at most
            cx, cy = dot.split(",")
            parts.append(f'<circle class="{css}" cx="{cx}" cy="{cy}" r="2"/>')
        right = WIDTH - PAD - 90 * (len(series) - 1 - x)
        parts.append(
            f'<text x="{right}" y="14" class="legend {css}" text-anchor="end" '
            f'data-field="{escape(field)}" data-sum="{total:g}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
