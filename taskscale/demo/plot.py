"""``taskscale demo``'s plot: arrivals, queue and replicas over the run, as a
PNG (matplotlib, imported only here: the ``demo`` extra)."""

from __future__ import annotations

import sys
from pathlib import Path

from taskscale.demo.load import TASK_TYPE, DemoSettings, LoadPlan
from taskscale.demo.report import RunResult


def write_plot(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> None:
    """Write the plot and say where; a plot that can't be written is one line."""
    if not result.samples:
        return
    try:
        path = plot(result, plan, settings)
    except ImportError as exc:
        hint = "install the demo extra: pip install -e '.[demo]' in a checkout"
        print(f"no plot: {exc} ({hint})", file=sys.stderr)
        return
    except (OSError, ValueError) as exc:  # unwritable, or a suffix matplotlib can't write
        print(f"no plot: cannot write {str(settings.out)!r}: {exc}", file=sys.stderr)
        return
    print(f"plot written to {path}")


def plot(result: RunResult, plan: LoadPlan, settings: DemoSettings) -> Path:
    """Load, queue, active and replicas over time, as a PNG (matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result.samples
    t = [s.t for s in samples]
    load = result.arrivals.per_second(len(samples))
    fig, (ax_load, ax_queue, ax_rep) = plt.subplots(3, 1, sharex=True, figsize=(10, 8))
    ax_load.bar(range(len(load)), load, width=1.0, align="edge", color="#8aa", label="arrivals/s")
    ax_load.set_ylabel("arrivals / s")
    ax_queue.plot(t, [s.queued + s.due for s in samples], label="queued + due")
    ax_queue.plot(t, [s.active for s in samples], label="active")
    ax_queue.plot(t, [s.upcoming for s in samples], "--", label="delayed within lead")
    ax_queue.set_ylabel("tasks")
    ax_rep.step(t, [s.replicas for s in samples], where="post", label="replicas")
    ax_rep.step(t, [s.desired for s in samples], "--", where="post", label="desired")
    decided = [at for at, _ in result.from_zero]
    ran = [first for _, first in result.from_zero if first is not None]
    if decided:
        ax_rep.plot(decided, [0] * len(decided), "v", color="#c60", label="decided (from 0)")
    if ran:
        ax_rep.plot(ran, [0] * len(ran), "o", color="#282", label="first task ran")
    ax_rep.set_ylabel("replicas")
    ax_rep.set_xlabel("seconds")
    ax_rep.set_ylim(-0.3, settings.max_replicas + 0.5)
    due = plan.spike.due_at_s
    for ax in (ax_load, ax_queue, ax_rep):
        ax.axvline(due, color="#c44", linestyle=":", linewidth=1)
        ax.axvspan(due - settings.warmup_lead_s, due, color="#fdd", alpha=0.4)
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(alpha=0.3)
    ax_load.set_title(
        f"taskscale demo: '{TASK_TYPE}' tasks, {settings.threads} per replica; "
        f"delayed spike due at {due:.0f} s (shaded: warm-up lead)"
    )
    fig.tight_layout()
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(settings.out, dpi=100)
    plt.close(fig)
    return settings.out
