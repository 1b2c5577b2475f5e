"""What every subcommand shares: the connection flags, the argument types,
the one-line error guard, and the client of a command.

Public for the other command modules (the dashboard's and the controller's
too): :class:`UsageError`, :func:`add_connection_arguments`,
:func:`guarded`, :func:`client_and_keys`, :func:`sharded_client`,
:func:`json_arg` and the argparse types (:func:`seconds`, :func:`count`,
:func:`offset`, :func:`threads`, :func:`port`, ...).  A default a flag
shares with a settings dataclass is read from it (:func:`add_setting`, with
``dataclass_defaults.default_of``), so each number is stated once.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

import redis

from taskscale.checks import MAX_COUNT, MAX_SECONDS
from taskscale.connection import (
    DEFAULT_REDIS_URL,
    REDIS_URL_ENV,
    RedisTooOld,
    RedisUnavailable,
    check,
    connect,
    redis_url_from_env,
)
from taskscale.dataclass_defaults import REQUIRED, default_of
from taskscale.errors import describe_error
from taskscale.json_input import MAX_JSON_BYTES, JsonInputError, parse_json
from taskscale.keys import DEFAULT_NAMESPACE, NAMESPACE_ENV, Keys, namespace_from_env
from taskscale.listening import ListenError
from taskscale.logs import add_logging_arguments, configure_logging
from taskscale.redis_urls import RedisClient
from taskscale.shards import ShardMap


class UsageError(Exception):
    """A mistake in the command line; printed as one line."""


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-url",
        default=redis_url_from_env(),
        help=f"Redis URL (env {REDIS_URL_ENV}; default {DEFAULT_REDIS_URL})",
    )
    parser.add_argument(
        "--namespace",
        default=namespace_from_env(),
        help=f"key namespace, or several (a,b,c) to spread types over shards: "
        f"docs/redis.md (env {NAMESPACE_ENV}; default {DEFAULT_NAMESPACE})",
    )
    add_logging_arguments(parser)


#: The most threads a worker runs tasks on.
MAX_THREADS = 1024
#: The most ``async def`` tasks a worker runs at once.
MAX_ASYNC_SLOTS = 100_000


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0 (not nan, inf or -1),
    at most :data:`MAX_SECONDS`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds >= 0")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {MAX_SECONDS} s (10 years)")
    return value


def whole(text: str, *, least: int = 0, most: int = MAX_COUNT) -> int:
    """A whole number from ``least`` to ``most``, or an argparse error naming it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least {least}")
    if value > most:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {most}")
    return value


def count(text: str) -> int:
    """argparse type: a whole number from 1 to :data:`MAX_COUNT`."""
    return whole(text, least=1)


def offset(text: str) -> int:
    """argparse type: a whole number from 0 to :data:`MAX_COUNT`."""
    return whole(text, least=0)


def threads(text: str) -> int:
    """argparse type: a worker's thread count, 1 to :data:`MAX_THREADS`."""
    return whole(text, least=1, most=MAX_THREADS)


def async_slots(text: str) -> int:
    """argparse type: how many ``async def`` tasks a worker runs at once."""
    return whole(text, least=1, most=MAX_ASYNC_SLOTS)


def port(text: str) -> int:
    """argparse type: a TCP port, 0-65535 (0: any free port)."""
    return whole(text, least=0, most=65535)


def processes(text: str) -> int:
    """argparse type: a number of worker processes, or ``auto`` (the CPU limit)."""
    if text.strip().lower() == "auto":
        from taskscale.worker.cpu_limit import auto_processes

        return min(auto_processes(), MAX_THREADS)
    return whole(text, least=1, most=MAX_THREADS)


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a subcommand; turn the errors a user can fix into one line."""

    def guarded(args: argparse.Namespace) -> int:
        configure_logging(args)
        try:
            return run(args)
        except (UsageError, ValueError, RedisUnavailable, RedisTooOld) as exc:
            print(f"taskscale {args.command}: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, UsageError | ValueError | RedisTooOld) else 1
        except ListenError as exc:  # a metrics or dashboard port
            print(f"taskscale {args.command}: {exc}", file=sys.stderr)
            return exc.exit_code
        except redis.RedisError as exc:
            print(f"taskscale {args.command}: {describe_error(exc)}", file=sys.stderr)
            return 1

    return guarded


def client_and_keys(args: argparse.Namespace) -> tuple[RedisClient, Keys]:
    """A checked client and the namespace of the command: with several
    namespaces (shards), the one of its task type (``args.type``)."""
    shards = ShardMap.parse(args.namespace)
    task_type = getattr(args, "type", None)
    if not shards.sharded:
        keys = Keys(shards.namespaces[0])
    elif isinstance(task_type, str):
        keys = shards.keys_for(task_type)
    else:
        raise UsageError(
            f"--namespace lists {len(shards.namespaces)} namespaces; "
            f"{args.command} works on one: name it"
        )
    client, _ = sharded_client(args)
    return client, keys


def sharded_client(args: argparse.Namespace) -> tuple[RedisClient, ShardMap]:
    shards = ShardMap.parse(args.namespace)
    client = connect(args.redis_url)
    check(client)
    return client, shards


def json_arg(text: str, kind: type, flag: str, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON argument (``--args``, ``--kwargs``) of type ``kind`` (list or
    dict), within the limits of :mod:`taskscale.json_input`; a
    :class:`UsageError` (exit 2) naming ``flag`` otherwise."""
    try:
        value = parse_json(text, flag, max_bytes=max_bytes)
    except JsonInputError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(value, kind):
        raise UsageError(f"{flag} must be a JSON {'array' if kind is list else 'object'}")
    return value


def add_setting(
    parser: argparse.ArgumentParser,
    flag: str,
    settings: type,
    name: str,
    *,
    type: Callable[[str], Any],
    help: str,
) -> None:
    """A flag whose default is field ``name`` of ``settings``, said in its help."""
    default = default_of(settings, name)
    if default is REQUIRED:
        raise LookupError(f"{settings.__name__}.{name} has no default")
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    parser.add_argument(flag, type=type, default=default, help=f"{help} (default {shown})")


def add_yes_argument(parser: argparse.ArgumentParser) -> None:
    """``--yes``/``-y`` for a command that deletes: see :func:`confirm`."""
    parser.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="do not ask (required when stdin is not a terminal)",
    )


def confirm(args: argparse.Namespace, removes: str) -> bool:
    """Whether a destructive command may go on, ``removes`` saying what it
    deletes ("160 ready and 40 delayed task(s) of t").

    ``--yes``: go on.  On a terminal: say what and ask (only "y" or "yes"
    goes on; False: nothing was removed).  Stdin not a terminal and no
    ``--yes``: :class:`UsageError` (exit 2), so a script never deletes
    without having said so.
    """
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(f"would delete {removes}: stdin is not a terminal, add --yes to confirm")
    print(f"This deletes {removes}.", file=sys.stderr)
    print("Delete? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return True
    print(f"taskscale {args.command}: nothing deleted", file=sys.stderr)
    return False
