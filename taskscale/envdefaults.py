"""Every command-line option can also come from the environment.

``--threads 8`` may be given as ``TASKSCALE_THREADS=8``: the variable's name
is ``TASKSCALE_`` plus the option's long name in capitals with ``-`` as
``_``. A flag on the command line wins over the variable, the variable over
the built-in default. The value goes through the option's own type check, so
``TASKSCALE_THREADS=zero`` is refused with the same sentence as
``--threads zero``. Switches (``--json``) take 1/true/yes/on or 0/false/no/off;
repeatable options (``--import``) take a comma-separated list.

``taskscale demo`` is left out: it starts its own Redis unless told
otherwise, and must not pick up an application's ``TASKSCALE_REDIS_URL``.

So are the flags that make a command destroy more or confirm a deletion
(:data:`COMMAND_LINE_ONLY`): an exported ``TASKSCALE_FORCE=1`` must never
turn ``taskscale types forget T`` into a forced delete of T's tasks, nor
``TASKSCALE_DELAYED=1`` widen every ``taskscale queue purge`` to the delayed
tasks. They are taken from the command line only; the variable is ignored.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

PREFIX = "TASKSCALE_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


#: Subcommand path -> the options of it that destroy or confirm, never read
#: from the environment (tests/test_envdefaults.py checks each exists).
COMMAND_LINE_ONLY: dict[tuple[str, ...], frozenset[str]] = {
    ("types", "forget"): frozenset({"--force"}),  # deletes the type's ready and delayed tasks
    ("queue", "purge"): frozenset({"--delayed"}),  # deletes the delayed tasks too
}


def env_name(option: str) -> str:
    """``--dead-letter-cap`` -> ``TASKSCALE_DEAD_LETTER_CAP``."""
    return PREFIX + option.lstrip("-").replace("-", "_").upper()


def apply_env_defaults(
    parser: argparse.ArgumentParser,
    environ: Mapping[str, str] | None = None,
    *,
    skip: tuple[str, ...] = (),
    path: tuple[str, ...] = (),
) -> None:
    """Set the defaults of ``parser`` and its subcommands (but those named in
    ``skip``) from ``environ``; ``path`` is ``parser``'s subcommand path (for
    :data:`COMMAND_LINE_ONLY`)."""
    env = os.environ if environ is None else environ
    command_line_only = COMMAND_LINE_ONLY.get(path, frozenset())
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name not in skip:
                    apply_env_defaults(sub, env, path=(*path, name))
            continue
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest in ("help", "version"):
            continue
        if command_line_only.intersection(longs):
            continue
        raw = env.get(env_name(longs[0]))
        if raw is None:
            continue
        if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
            value = raw.strip().lower()
            if value not in _TRUE | _FALSE:
                parser.error(f"{env_name(longs[0])}={raw!r}: use 1/true/yes/on or 0/false/no/off")
            on = value in _TRUE
            action.default = on if isinstance(action, argparse._StoreTrueAction) else not on
        elif isinstance(action, argparse._AppendAction):
            action.default = [v.strip() for v in raw.split(",") if v.strip()]
        else:
            action.default = raw  # a string: argparse applies the option's type to it
