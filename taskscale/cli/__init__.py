"""The ``taskscale`` command line: one entry point, one subcommand per job.

Each subcommand lives in the module that owns the work and contributes an
``add_parser(subparsers)`` function; this module only assembles them, so
``taskscale worker`` never imports the Kubernetes client.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from taskscale import __version__
from taskscale.cli.envdefaults import apply_env_defaults

#: subcommand -> module providing ``add_parser(subparsers) -> None``; the
#: parser it adds sets ``func(args) -> int`` as its default.
SUBCOMMANDS: dict[str, str] = {
    "worker": "taskscale.cli.runtime",
    "scheduler": "taskscale.cli.runtime",
    "enqueue": "taskscale.cli.runtime",
    "status": "taskscale.cli.runtime",
    "dead": "taskscale.cli.admin",
    "delayed": "taskscale.cli.admin",
    "queue": "taskscale.cli.admin",
    "task": "taskscale.cli.admin",
    "types": "taskscale.cli.admin",
    "cancel": "taskscale.cli.cancel",
    "fanout": "taskscale.cli.fanout",
    "workflow": "taskscale.cli.workflow",
    "schedules": "taskscale.cli.schedules",
    "catalog": "taskscale.cli.catalog",
    "dashboard": "taskscale.dashboard.server",
    "limits": "taskscale.cli.limits",
    "stats": "taskscale.cli.stats",
    "scripts": "taskscale.cli.scripts",
    "crd": "taskscale.cli.crd",
    "controller": "taskscale.controller.cli",
    "demo": "taskscale.demo.run",
}

#: The extra that brings an optional subcommand's dependencies.
EXTRAS: dict[str, str] = {
    "taskscale.dashboard.server": "dashboard",
    "taskscale.controller.cli": "controller",
    "taskscale.demo.run": "demo",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with a known ``command``, only the module that
    provides it is imported (``taskscale worker`` starts without importing the
    controller, the console or the demo: a local worker starts sooner)."""
    parser = argparse.ArgumentParser(
        prog="taskscale",
        description="Redis task queue workers, scaled by demand.",
    )
    parser.add_argument("--version", action="version", version=f"taskscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [SUBCOMMANDS[command]] if command in SUBCOMMANDS else SUBCOMMANDS.values()
    for module_name in dict.fromkeys(modules):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:  # an optional part (e.g. controller extra) is missing
            missing = [c for c, m in SUBCOMMANDS.items() if m == module_name]
            for command in missing:
                p = sub.add_parser(command, help=f"(unavailable: {exc})")
                p.set_defaults(func=_unavailable(command, exc, EXTRAS.get(module_name, "")))
            continue
        module.add_parser(sub)
    # demo starts its own Redis: an exported TASKSCALE_REDIS_URL must not redirect it
    apply_env_defaults(parser, skip=("demo",))
    return parser


def _unavailable(command: str, exc: ImportError, extra: str) -> object:
    hint = f"; install its extra: pip install -e '.[{extra}]' in a checkout" if extra else ""

    def run(_: argparse.Namespace) -> int:
        print(f"taskscale {command}: not available ({exc}){hint}", file=sys.stderr)
        return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code = int(func(args))
        sys.stdout.flush()  # here, not at exit: a closed pipe is seen below
    except BrokenPipeError:
        return _reader_gone()
    return code


#: The exit code of a command whose reader went away (``| head``): 128 + SIGPIPE,
#: what a shell reports for a command a closed pipe stopped.
BROKEN_PIPE_EXIT = 141


def _reader_gone() -> int:
    """``taskscale status --json | head``: the reader closed the pipe.  Stop
    quietly (no traceback): point stdout at /dev/null so the interpreter's
    last flush at exit has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return BROKEN_PIPE_EXIT
