"""The runtime benchmark's report (issue 2's no-op runs): medians per system
and figure, taskscale's ratio to the best peer, the terminal table, the docs
table and the plot, from samples or a results file."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.runtime_settings import LATE_GRACE_S, Sample

METRICS: tuple[tuple[str, str, bool], ...] = (
    ("enqueue", "enqueue tasks/s", True),
    ("drain1", "drain 1 proc tasks/s", True),
    ("drain2", "drain 2 procs tasks/s", True),
    ("p50_ms", "lateness p50 ms", False),
    ("p99_ms", "lateness p99 ms", False),
)
"""(key, label, higher is better) of every reported figure."""


def metric_values(samples: Sequence[Sample], peer: str, key: str) -> list[float]:
    mine = [x for x in samples if x.peer == peer and x.ok]
    if key == "enqueue":
        return [x.rate for x in mine if x.op == "enqueue"]
    if key.startswith("drain"):
        w = int(key.removeprefix("drain"))
        return [x.rate for x in mine if x.op == "drain" and x.workers == w]
    # Lateness: every run whose schedule was written in time counts; a run
    # in which some tasks never ran counts as infinitely late at the
    # percentiles those tasks reach (dropping it would flatter the system).
    late = [x for x in samples if x.peer == peer and x.op == "lateness" and x.extra]
    valid = [x for x in late if x.extra["scheduled_ahead_s"] >= 0]
    return [INF if x.extra[key] is None else float(x.extra[key]) for x in valid]


INF = float("inf")


def finite_or_none(value: float) -> float | None:
    return None if value == INF else value


def summarize(samples: Sequence[Sample], peers: Sequence[str]) -> dict[str, Any]:
    """Medians per system and metric, and taskscale's ratio to the best peer."""
    medians: dict[str, dict[str, float | None]] = {}
    for peer in peers:
        medians[peer] = {}
        for key, _, _ in METRICS:
            values = metric_values(samples, peer, key)
            medians[peer][key] = finite_or_none(statistics.median(values)) if values else None
    ratios: dict[str, dict[str, Any]] = {}
    for key, _, higher in METRICS:
        others = [(p, medians[p][key]) for p in peers if p != "taskscale"]
        others_ok = [(p, v) for p, v in others if v is not None]
        ours = medians.get("taskscale", {}).get(key)
        if not others_ok or ours is None:
            continue
        best_peer, best = (max if higher else min)(others_ok, key=lambda pv: pv[1])
        ratio = ours / best if higher else best / ours if ours > 0 else None
        ratios[key] = {"best_peer": best_peer, "best_peer_value": best, "ratio": ratio}
    return {"medians": medians, "ratios": ratios}


def print_table(summary: dict[str, Any], peers: Sequence[str]) -> None:
    medians = summary["medians"]
    header = f"{'system':10}" + "".join(f"{label:>24}" for _, label, _ in METRICS)
    print(header)
    for peer in peers:
        cells = []
        for key, _, _ in METRICS:
            value = medians[peer][key]
            cells.append(f"{'failed':>24}" if value is None else f"{value:>24,.1f}")
        print(f"{peer:10}" + "".join(cells))
    print()
    for key, label, higher in METRICS:
        r = summary["ratios"].get(key)
        if r is None or r["ratio"] is None:
            continue
        how = "x the fastest peer" if higher else "x lower than the best peer"
        print(f"{label:24} taskscale {r['ratio']:.2f} {how} ({r['best_peer']})")


def markdown_table(result: dict[str, Any]) -> str:
    """The docs table of a results file: medians, [min-max] over runs, and
    the ratio row, so docs/benchmarks.md never retypes a number."""
    peers = list(result["summary"]["medians"])
    samples = [Sample(**{**x, "loadavg": tuple(x["loadavg"])}) for x in result["samples"]]
    summary = summarize(samples, peers)
    lines = ["| system | " + " | ".join(label for _, label, _ in METRICS) + " |"]
    lines.append("|---" * (len(METRICS) + 1) + "|")
    for peer in peers:
        cells = []
        for key, _, _ in METRICS:
            values = metric_values(samples, peer, key)
            if not values:
                cells.append(fell_behind_cell(samples, peer, key))
                continue
            median = statistics.median(values)
            spread = f"{number(min(values))}-{number(max(values))}"
            shown = number(median)
            cells.append(
                f"**{shown}** ({spread})" if peer == "taskscale" else f"{shown} ({spread})"
            )
        lines.append(f"| {peer} | " + " | ".join(cells) + " |")
    ratio_cells = []
    for key, _, higher in METRICS:
        r = summary["ratios"].get(key)
        if r is None or r["ratio"] is None:
            ratio_cells.append("-")
        else:
            word = "faster" if higher else "lower"
            ratio_cells.append(f"{r['ratio']:.1f}x {word} than {r['best_peer']}")
    lines.append("| taskscale vs best peer | " + " | ".join(ratio_cells) + " |")
    return "\n".join(lines)


def number(value: float) -> str:
    if value == INF:
        return "never"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def fell_behind_cell(samples: Sequence[Sample], peer: str, key: str) -> str:
    """Table cell for a metric with no valid sample: a lateness lower bound
    when the system fell behind the schedule, else 'failed'."""
    op = "lateness" if key.endswith("_ms") else "drain" if key.startswith("drain") else key
    if not any(x.peer == peer and x.op == op for x in samples):
        return "-"
    behind = [x for x in samples if x.peer == peer and x.op == "lateness" and x.extra]
    if op != "lateness" or not behind:
        return "failed"
    ran = statistics.median(x.extra["ran"] / x.extra["scheduled"] for x in behind)
    bounds = [x.extra[key] for x in behind if x.extra[key] is not None]
    if len(bounds) == len(behind):
        return f">= {statistics.median(bounds):,.0f} (fell behind, {ran:.0%} ran)"
    return f"> {LATE_GRACE_S * 1000:,.0f} after the last due ({ran:.0%} ran)"


#: Issue 2's targets, drawn on the plot: 20k tasks/s drained by 2 processes,
#: p99 lateness at most 5 ms.
GOALS = {"drain2": 20_000.0, "p99_ms": 5.0}


def plot(summary: dict[str, Any], peers: Sequence[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = summary["medians"]
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.2))
    colors = ["#d62728" if p == "taskscale" else "#7f7f7f" for p in peers]
    panels = (
        ("enqueue", "enqueue (tasks/s)", False),
        ("drain1", "drain, 1 worker process (tasks/s)", False),
        ("drain2", "drain, 2 worker processes (tasks/s)", False),
        ("p99_ms", "delayed-task lateness p99 (ms, log)", True),
    )
    for ax, (key, label, log) in zip(axes, panels, strict=True):
        values = [medians[p][key] or 0.0 for p in peers]
        bars = ax.bar(peers, values, color=colors)
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", labelrotation=35, labelsize=9)
        if log:
            ax.set_yscale("log")
        if key in GOALS:
            ax.axhline(GOALS[key], color="#1f77b4", linestyle="--", linewidth=1)
            ax.annotate(
                "issue 2 goal",
                (0.98, GOALS[key]),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=8,
                color="#1f77b4",
            )
        for bar, value in zip(bars, values, strict=True):
            missing = "fell behind" if log else "failed"
            x = bar.get_x() + bar.get_width() / 2
            if value == 0:  # nothing to draw: say why, at the foot of the axis
                ax.annotate(
                    missing,
                    (x, 0.02),
                    xycoords=("data", "axes fraction"),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                    rotation=90,
                )
                continue
            text = f"{value:,.0f}" if value >= 10 else f"{value:.1f}"
            ax.annotate(text, (x, bar.get_height()), ha="center", va="bottom", fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replot(result: dict[str, Any], path: Path) -> None:
    """Draw the plot of a results file again (medians recomputed from samples)."""
    samples = [Sample(**{**x, "loadavg": tuple(x["loadavg"])}) for x in result["samples"]]
    peers = list(result["summary"]["medians"])
    plot(summarize(samples, peers), peers, path, plot_title(result["meta"]["settings"]))


def plot_title(settings: dict[str, str]) -> str:
    return (
        f"{int(settings['n']):,} no-op tasks, {settings['threads']} threads/process, medians of "
        f"{settings['runs']} runs; lateness at {float(settings['late_rate']):,.0f}/s "
        f"({os.cpu_count()} shared cores)"
    )
