"""``taskscale workflow show|cancel ID [--json]``: where a workflow stands
(its steps with state, timing, results or errors), or cancel it as a whole
(docs/workflows.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from taskscale.cli.common import add_connection_arguments, client_and_keys, guarded
from taskscale.workflows.state import StepState, cancel, read

#: Characters of a result or error shown per step (``--json`` shows all).
SHOWN_CHARS = 80


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("workflow", help="show or cancel a workflow (chain, group, DAG)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="the workflow's state and each step's")
    stop = actions.add_parser("cancel", help="cancel it: pending steps never start")
    for q in (show, stop):
        add_connection_arguments(q)
        q.add_argument("id", metavar="ID", help="the workflow id (printed by .enqueue())")
        q.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=guarded(_show))
    stop.set_defaults(func=guarded(_cancel))


def _brief(step: StepState) -> str:
    if step.result is None:
        return ""
    text = json.dumps(step.result, separators=(",", ":"))
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def _show(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    state = read(args.id, client=client, keys=keys)
    if state is None:
        print(f"workflow {args.id}: unknown (never submitted, or expired)")
        return 3
    if args.json:
        print(json.dumps(state.as_dict(), indent=2, sort_keys=True))
        return 0
    took = ""
    if state.finished_ms is not None:
        took = f" in {(state.finished_ms - state.created_ms) / 1000:.3f}s"
    print(
        f"workflow {state.id}{f' ({state.name})' if state.name else ''}: {state.state}{took}; "
        f"{state.finished}/{state.total} steps final, {state.failed} failed, policy {state.policy}"
    )
    if state.reason:
        print(f"  reason: {state.reason}")
    for s in state.steps:
        after = f" after {','.join(s.parents)}" if s.parents else ""
        ran = ""
        if s.ready_ms is not None and s.done_ms is not None:
            ran = f" {(s.done_ms - s.ready_ms) / 1000:.3f}s"
        label = f" [{s.label}]" if s.label else ""
        print(f"  {s.id:<6} {s.type}{label}{after}: {s.state}{ran} {_brief(s)}".rstrip())
    return 0


def _cancel(args: argparse.Namespace) -> int:
    client, keys = client_and_keys(args)
    result = cancel(args.id, "cancelled from the command line", client=client, keys=keys)
    if args.json:
        print(json.dumps({"id": args.id, "outcome": result.outcome, "state": result.state}))
    elif result.outcome == "ended":
        print(
            f"workflow {args.id}: cancelled "
            "(pending steps will not start; running ones asked to stop)"
        )
    elif result.outcome == "finished":
        print(f"workflow {args.id}: already {result.state}")
    else:
        print(f"workflow {args.id}: unknown (never submitted, or expired)")
    return 3 if result.outcome == "unknown" else 0
