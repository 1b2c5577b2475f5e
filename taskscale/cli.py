"""The ``taskscale`` command line: one entry point, one subcommand per job.

Each subcommand lives in the module that owns the work and contributes an
``add_parser(subparsers)`` function; this module only assembles them, so
``taskscale worker`` never imports the Kubernetes client.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from taskscale import __version__
from taskscale.envdefaults import apply_env_defaults

#: subcommand -> module providing ``add_parser(subparsers) -> None``; the
#: parser it adds sets ``func(args) -> int`` as its default.
SUBCOMMANDS: dict[str, str] = {
    "worker": "taskscale.cli_runtime",
    "scheduler": "taskscale.cli_runtime",
    "enqueue": "taskscale.cli_runtime",
    "status": "taskscale.cli_runtime",
    "dead": "taskscale.cli_admin",
    "delayed": "taskscale.cli_admin",
    "queue": "taskscale.cli_admin",
    "task": "taskscale.cli_admin",
    "types": "taskscale.cli_admin",
    "cancel": "taskscale.cli_cancel",
    "fanout": "taskscale.cli_fanout",
    "schedules": "taskscale.cli_schedules",
    "catalog": "taskscale.cli_catalog",
    "dashboard": "taskscale.dashboard.server",
    "limits": "taskscale.cli_limits",
    "crd": "taskscale.cli_crd",
    "controller": "taskscale.controller.cli",
    "demo": "taskscale.controller.cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskscale",
        description="Redis task queue workers, scaled by demand.",
    )
    parser.add_argument("--version", action="version", version=f"taskscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    seen: set[str] = set()
    for module_name in dict.fromkeys(SUBCOMMANDS.values()):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:  # an optional part (e.g. controller extra) is missing
            missing = [c for c, m in SUBCOMMANDS.items() if m == module_name]
            for command in missing:
                p = sub.add_parser(command, help=f"(unavailable: {exc})")
                p.set_defaults(func=_unavailable(command, exc))
            continue
        module.add_parser(sub)
        seen.add(module_name)
    # demo starts its own Redis: an exported TASKSCALE_REDIS_URL must not redirect it
    apply_env_defaults(parser, skip=("demo",))
    return parser


def _unavailable(command: str, exc: ImportError) -> object:
    def run(_: argparse.Namespace) -> int:
        print(
            f"taskscale {command}: not available ({exc}); "
            "install with: pip install 'taskscale[controller]'",
            file=sys.stderr,
        )
        return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args))


if __name__ == "__main__":
    sys.exit(main())
