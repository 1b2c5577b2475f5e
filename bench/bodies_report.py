"""Issue 11's report: drain rates per task body, side by side.

``bench.runtime_bench --body empty,incr,sleep`` hands its samples here: the
medians per (body, system) of the drain rate at each worker-process count,
every taskscale variant's ratio to the fastest peer of that body, the goals
of issue 11 and whether they are reached, a markdown table for
docs/benchmarks.md and a plot (one panel per body).

    .venv/bin/python -m bench.runtime_bench --table bench/results/runtime-bodies.json
    .venv/bin/python -m bench.runtime_bench --replot bench/results/runtime-bodies.json PNG
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.peers.probe import SLEEP_S
from bench.runtime_profile import print_profiles
from bench.runtime_settings import BenchSettings, Sample

#: Issue 11's goals: the one-INCR body at >= 3x the fastest peer, the 1 ms
#: sleep within 10 % of slots / 1 ms, the empty body >= 20k tasks/s (2 procs).
INCR_FACTOR = 3.0
SLEEP_SHARE = 0.9
EMPTY_RATE = 20_000.0


def is_ours(peer: str) -> bool:
    return peer == "taskscale" or peer.startswith("taskscale-")


def drains(samples: Sequence[Any], body: str, peer: str, workers: int) -> list[float]:
    return [
        x.rate
        for x in samples
        if x.ok and x.op == "drain" and x.body == body and x.peer == peer and x.workers == workers
    ]


def summarize(
    samples: Sequence[Any], peers: Sequence[str], bodies: Sequence[str], workers: int, slots: int
) -> dict[str, Any]:
    """Medians, ratios to the fastest peer and the goals, for one process count."""
    medians: dict[str, dict[str, float | None]] = {}
    ratios: dict[str, dict[str, Any]] = {}
    for body in bodies:
        row: dict[str, float | None] = {}
        for peer in peers:
            values = drains(samples, body, peer, workers)
            row[peer] = statistics.median(values) if values else None
        medians[body] = row
        others = [(p, v) for p, v in row.items() if not is_ours(p) and v is not None]
        if others:
            best_peer, best = max(others, key=lambda pv: pv[1])
            ratios[body] = {
                "best_peer": best_peer,
                "best_peer_value": best,
                "ratio": {p: (v / best if v else None) for p, v in row.items() if is_ours(p)},
            }
    ideal = workers * slots / SLEEP_S
    goals = goal_status(medians, ratios, ideal, workers)
    return {"workers": workers, "slots": slots, "medians": medians, "ratios": ratios} | {
        "sleep_ideal": ideal,
        "goals": goals,
    }


def goal_status(
    medians: dict[str, dict[str, float | None]],
    ratios: dict[str, dict[str, Any]],
    ideal: float,
    workers: int,
) -> list[dict[str, Any]]:
    """Each goal with the best taskscale variant's figure and whether it is met."""
    goals: list[dict[str, Any]] = []

    def best_ours(body: str) -> tuple[str, float] | None:
        ours = [(p, v) for p, v in medians.get(body, {}).items() if is_ours(p) and v]
        return max(ours, key=lambda pv: pv[1]) if ours else None

    got = best_ours("incr")
    if got and "incr" in ratios:
        ratio = got[1] / ratios["incr"]["best_peer_value"]
        goals.append(
            {
                "goal": f">= {INCR_FACTOR:g}x the fastest peer, one-INCR body, {workers} procs",
                "system": got[0],
                "value": f"{ratio:.2f}x {ratios['incr']['best_peer']}",
                "met": ratio >= INCR_FACTOR,
            }
        )
    got = best_ours("sleep")
    if got:
        share = got[1] / ideal
        goals.append(
            {
                "goal": f">= {SLEEP_SHARE:.0%} of slots / 1 ms ({ideal:,.0f}/s), 1 ms sleep body",
                "system": got[0],
                "value": f"{share:.0%} of ideal",
                "met": share >= SLEEP_SHARE,
            }
        )
    got = best_ours("empty")
    if got:
        goals.append(
            {
                "goal": f">= {EMPTY_RATE:,.0f} tasks/s, empty body, {workers} procs",
                "system": got[0],
                "value": f"{got[1]:,.0f}/s",
                "met": workers == 2 and got[1] >= EMPTY_RATE,
            }
        )
    return goals


def settings_of(meta: dict[str, Any]) -> tuple[list[str], list[str], list[int], int]:
    s = meta["settings"]
    peers = list(meta.get("measured") or meta["peers"])
    bodies = [b.strip(" '\"") for b in s["bodies"].strip("()").split(",") if b.strip(" '\"")]
    workers = [int(w) for w in s["workers"].strip("()").split(",") if w.strip()]
    return peers, bodies, workers, int(s["threads"])


def markdown(result: dict[str, Any]) -> str:
    """Docs tables: drain tasks/s, median (min-max) over runs, per body."""
    samples = samples_of(result)
    peers, bodies, workers, slots = settings_of(result["meta"])
    out: list[str] = []
    for w in workers:
        summary = summarize(samples, peers, bodies, w, slots)
        out.append(f"{w} worker process(es) x {slots} threads/slots, drain tasks/s:\n")
        out.append("| system | " + " | ".join(bodies) + " |")
        out.append("|---" * (len(bodies) + 1) + "|")
        for peer in peers:
            cells = []
            for body in bodies:
                values = drains(samples, body, peer, w)
                if not values:
                    cells.append("failed")
                    continue
                cell = f"{num(statistics.median(values))} ({num(min(values))}-{num(max(values))})"
                cells.append(f"**{cell}**" if is_ours(peer) else cell)
            out.append(f"| {peer} | " + " | ".join(cells) + " |")
        for peer in [p for p in peers if is_ours(p)]:
            cells = []
            for body in bodies:
                r = summary["ratios"].get(body)
                ratio = r["ratio"].get(peer) if r else None
                cells.append(f"{ratio:.2f}x {r['best_peer']}" if r and ratio else "-")
            out.append(f"| {peer} vs fastest peer | " + " | ".join(cells) + " |")
        out.append("")
        for g in summary["goals"]:
            mark = "met" if g["met"] else "NOT met"
            out.append(f"- {g['goal']}: {g['system']} {g['value']} -- {mark}")
        out.append("")
    return "\n".join(out)


def num(value: float) -> str:
    return f"{value:,.0f}"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = samples_of(result)
    peers, bodies, workers, slots = settings_of(result["meta"])
    w = max(workers)
    summary = summarize(samples, peers, bodies, w, slots)
    fig, axes = plt.subplots(1, len(bodies), figsize=(5.2 * len(bodies), 4.4))
    axes = [axes] if len(bodies) == 1 else list(axes)
    colors = ["#d62728" if is_ours(p) else "#7f7f7f" for p in peers]
    for ax, body in zip(axes, bodies, strict=True):
        values = [summary["medians"][body][p] or 0.0 for p in peers]
        bars = ax.bar(peers, values, color=colors)
        ax.set_title(f"body: {body} (tasks/s)", fontsize=10)
        ax.tick_params(axis="x", labelrotation=40, labelsize=8)
        goal, label = goal_line(summary, body)
        if goal:
            ax.axhline(goal, color="#1f77b4", linestyle="--", linewidth=1)
            ax.annotate(
                label,
                (0.98, goal),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=8,
                color="#1f77b4",
            )
        for bar, value in zip(bars, values, strict=True):
            x = bar.get_x() + bar.get_width() / 2
            text = num(value) if value else "failed"
            ax.annotate(text, (x, bar.get_height()), ha="center", va="bottom", fontsize=7)
    s = result["meta"]["settings"]
    fig.suptitle(
        f"issue 11: drains of up to {int(s['n']):,} tasks cut at {float(s['drain_window']):g} s, "
        f"{w} processes x {slots} threads/slots, "
        f"medians of {s['runs']} interleaved runs ({result['meta']['machine']['cpus']} shared "
        "cores)",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def goal_line(summary: dict[str, Any], body: str) -> tuple[float, str]:
    if body == "empty":
        return EMPTY_RATE, "issue 11 goal (2 procs)"
    if body == "sleep":
        return summary["sleep_ideal"] * SLEEP_SHARE, "90% of slots / 1 ms"
    r = summary["ratios"].get(body)
    if body == "incr" and r:
        return INCR_FACTOR * r["best_peer_value"], f"{INCR_FACTOR:g}x {r['best_peer']}"
    return 0.0, ""


def samples_of(result: dict[str, Any]) -> list[Any]:
    return [Sample(**{**x, "loadavg": tuple(x["loadavg"])}) for x in result["samples"]]


def finish(
    meta: dict[str, Any], samples: Sequence[Any], settings: BenchSettings, logs: Path
) -> int:
    """Write the results file and the plot, print the tables (the harness's end)."""
    meta["measured"] = list(settings.peers)
    result = {"meta": meta, "samples": [asdict(x) for x in samples]}
    peers, bodies, workers, slots = settings_of(meta)
    result["summary"] = {str(w): summarize(samples, peers, bodies, w, slots) for w in workers}
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print(markdown(result))
    plot(result, settings.plot)
    if settings.profile_dir is not None:
        print_profiles(settings.profile_dir)
    print(f"\nwrote {settings.out} and {settings.plot}; worker logs in {logs}")
    return 0


def offline(op: str, result: dict[str, Any], rest: Sequence[str]) -> int:
    """``--table`` / ``--replot`` of a results file of this kind."""
    if op == "--table":
        print(markdown(result))
    else:
        plot(result, Path(rest[0]) if rest else Path("docs/img/runtime-bodies.png"))
    return 0
