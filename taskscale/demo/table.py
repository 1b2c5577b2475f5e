"""``taskscale demo``'s console table: one row per second of what the
reconciler saw and decided (the header again every screenful on a terminal)."""

from __future__ import annotations

import sys
from typing import TextIO

from taskscale.controller.outcome import PassOutcome
from taskscale.demo.report import Sample


class Table:
    """One row per second; the header again every screenful on a terminal."""

    HEADER = f"{'time':>6} {'load/s':>6} {'queued':>6} {'due':>4} {'upcoming':>8} "
    HEADER += f"{'active':>6} {'replicas':>9}  decision"

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stdout
        self._tty = self._out.isatty()
        self._rows = 0

    def row(self, s: Sample, load: int, reason: str) -> None:
        if self._rows % (25 if self._tty else 10_000) == 0:
            self._print(self.HEADER)
        self._rows += 1
        replicas = f"{s.replicas}/{s.desired}"
        self._print(
            f"{s.t:5.0f}s {load:6d} {s.queued:6d} {s.due:4d} {s.upcoming:8d} "
            f"{s.active:6d} {replicas:>9}  {reason}"
        )

    def _print(self, line: str) -> None:
        print(line, file=self._out, flush=True)


def reason_text(outcome: PassOutcome | None, width: int = 90) -> str:
    if outcome is None or outcome.decision is None:
        return "waiting for the first pass" if outcome is None else outcome.message
    text = f"{outcome.decision.reason_code}: {outcome.decision.reason}"
    return text if len(text) <= width else text[: width - 3] + "..."
