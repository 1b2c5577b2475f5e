"""Every command-line option can also come from the environment.

``--threads 8`` may be given as ``TASKSCALE_THREADS=8``: the variable's name
is ``TASKSCALE_`` plus the option's long name in capitals with ``-`` as
``_``. A flag on the command line wins over the variable, the variable over
the built-in default. The value goes through the option's own type check, so
``TASKSCALE_THREADS=zero`` is refused with the same sentence as
``--threads zero``, naming the variable (when the subcommand runs: a bad
variable of ``worker`` does not break ``taskscale --version``). Switches
(``--json``) take 1/true/yes/on or 0/false/no/off;
repeatable options (``--import``) take a comma-separated list.

``taskscale demo`` is left out: it starts its own Redis unless told
otherwise, and must not pick up an application's ``TASKSCALE_REDIS_URL``.
``--redis-url`` and ``--namespace`` elsewhere take ``TASKSCALE_REDIS_URL``
and ``TASKSCALE_NAMESPACE`` from their own definitions
(:data:`READ_BY_THEIR_DEFINITION`): each variable has one reader.

So are the flags that make a command destroy more or confirm a deletion
(:data:`COMMAND_LINE_ONLY`): an exported ``TASKSCALE_FORCE=1`` must never
turn ``taskscale types forget T`` into a forced delete of T's tasks, nor
``TASKSCALE_DELAYED=1`` widen every ``taskscale queue purge`` to the delayed
tasks, nor ``TASKSCALE_YES=1`` confirm every deletion in advance. They are
taken from the command line only; the variable is ignored.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import Any

PREFIX = "TASKSCALE_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


#: Subcommand path -> the options of it that destroy or confirm, never read
#: from the environment (tests/cli/test_envdefaults.py checks each exists).
COMMAND_LINE_ONLY: dict[tuple[str, ...], frozenset[str]] = {
    ("types", "forget"): frozenset({"--force", "--yes"}),  # deletes ready and delayed tasks
    ("queue", "purge"): frozenset({"--delayed", "--yes"}),  # deletes the delayed tasks too
    # --yes confirms a deletion without asking (cli/common.confirm)
    ("dead", "purge"): frozenset({"--yes"}),
    ("delayed", "delete"): frozenset({"--yes"}),
    ("schedules", "remove"): frozenset({"--yes"}),
}

#: Options whose own definition reads their variable, through the one function
#: that owns it -- ``--redis-url``'s default is
#: ``taskscale.connection.redis_url_from_env()`` and ``--namespace``'s
#: ``taskscale.keys.namespace_from_env()``, the library's readers too --
#: so they are not read a second time here.
READ_BY_THEIR_DEFINITION = frozenset({"--redis-url", "--namespace"})


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
        if command_line_only.intersection(longs) or READ_BY_THEIR_DEFINITION.intersection(longs):
            continue
        raw = env.get(env_name(longs[0]))
        if raw is None:
            continue
        if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
            # a switch takes no value, so argparse uses its type only on a
            # string default: checked when the subcommand runs, like the rest
            action.default = EnvValue(raw, env_name(longs[0]))
            action.type = _switch(isinstance(action, argparse._StoreTrueAction))
        elif isinstance(action, argparse._AppendAction):
            action.default = [v.strip() for v in raw.split(",") if v.strip()]
        else:
            # a string: argparse applies the option's type to it when the flag
            # is not given; the subclass lets an error name the variable
            action.default = EnvValue(raw, env_name(longs[0]))
            action.type = _naming_variable(action)


class EnvValue(str):
    """A default taken from the environment: a string that knows its variable."""

    variable: str

    def __new__(cls, value: str, variable: str) -> EnvValue:
        made = super().__new__(cls, value)
        made.variable = variable
        return made


def _switch(store_true: bool) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        value = text.strip().lower()
        if value not in _TRUE | _FALSE:
            variable = getattr(text, "variable", "the variable")
            raise argparse.ArgumentTypeError(
                f"{text!r}: use 1/true/yes/on or 0/false/no/off (from {variable})"
            )
        on = value in _TRUE
        return on if store_true else not on

    parse.__name__ = "switch"
    return parse


def _naming_variable(action: argparse.Action) -> Callable[[str], Any]:
    """The option's type (or ``str``), but an error about a value from the
    environment says which variable held it."""
    convert = action.type if callable(action.type) else str
    if getattr(convert, "names_variable", False):  # already wrapped (parser built twice)
        return convert

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            if not isinstance(text, EnvValue):
                raise
            if isinstance(exc, argparse.ArgumentTypeError):
                reason = str(exc)
            else:  # argparse's own wording for a plain int/float type
                reason = f"invalid {getattr(convert, '__name__', 'value')} value: {text!r}"
            raise argparse.ArgumentTypeError(f"{reason} (from {text.variable})") from None
        return str(value) if type(value) is EnvValue else value

    parse.__name__ = getattr(convert, "__name__", "value")
    parse.names_variable = True  # type: ignore[attr-defined]
    return parse
