"""Logging for every long-running command: one set of flags, text or JSON.

``--log-level`` (env ``TASKSCALE_LOG_LEVEL``) and ``--log-format text|json``
(env ``TASKSCALE_LOG_FORMAT``) are added by :func:`add_logging_arguments` and
checked the same way by every command; :func:`configure_logging` applies them.

JSON lines come from python-json-logger, one object per record with
``time``, ``level``, ``logger`` and ``message``, plus ``task_id``,
``task_type`` and ``worker_id`` while a task runs (set by the worker through
:func:`task_fields`, so a task function's own log lines carry them too), and
``worker_id`` on every other record of a worker's threads (start, drain,
Redis trouble, a lost lease: :func:`worker_fields`) or about one worker
(the supervisor passes ``extra={"worker_id": ...}``). Text lines show the
fields in brackets, but for a value the message already says.
Passwords in URLs are masked in every message and traceback, in both formats.
"""

from __future__ import annotations

import argparse
import contextvars
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOG_LEVEL_ENV = "TASKSCALE_LOG_LEVEL"
LOG_FORMAT_ENV = "TASKSCALE_LOG_FORMAT"
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
#: The log format unless told (--log-format, TASKSCALE_LOG_FORMAT).
DEFAULT_FORMAT = FORMATS[0]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Fields a record carries while a task runs (JSON keys; text shows them too).
TASK_FIELDS = ("task_id", "task_type", "worker_id")

_task: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "taskscale_task", default=None
)
_worker: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "taskscale_worker", default=None
)
# scheme://user:password@ -> scheme://user:***@ (any scheme, user may be empty)
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@]*:)[^\s@/]+@", re.IGNORECASE)
# ?password=..., &sentinel_password=..., &ssl_password=... in a URL's query
_QUERY_PASSWORD = re.compile(r"([?&][a-z_]*password=)[^&\s'\"]+", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``
    (the user-info part and any ``*password=`` query parameter)."""
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


def _choice(name: str, allowed: tuple[str, ...]) -> Any:
    def parse(text: str) -> str:
        value = text.strip().lower()
        value = {"warn": "warning"}.get(value, value)
        if value not in allowed:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {name}: use one of {', '.join(allowed)}"
            )
        return value

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def add_logging_arguments(
    parser: argparse.ArgumentParser, *, default_level: str = "info", from_env: bool = True
) -> None:
    """``--log-level`` and ``--log-format``, defaulting to their env variables
    (unless ``from_env`` is False: ``taskscale demo`` reads no environment)."""
    env = os.environ if from_env else {}
    where = f"env {LOG_LEVEL_ENV}; " if from_env else ""
    parser.add_argument(
        "--log-level",
        type=_choice("log level", LEVELS),
        default=env.get(LOG_LEVEL_ENV, default_level),
        help=f"{', '.join(LEVELS)} ({where}default {default_level})",
    )
    where = f"env {LOG_FORMAT_ENV}; " if from_env else ""
    parser.add_argument(
        "--log-format",
        type=_choice("log format", FORMATS),
        default=env.get(LOG_FORMAT_ENV, DEFAULT_FORMAT),
        help=f"text or json, one object per line ({where}default {DEFAULT_FORMAT})",
    )


class _Context(logging.Filter):
    """Masks URL passwords and adds the running task's (or worker's) fields to a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message or record.args:
            record.msg, record.args = masked, None
        if record.exc_text:  # a traceback another handler already rendered
            record.exc_text = redact(record.exc_text)
        fields = _task.get()
        if fields:
            for key, value in fields.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        worker_id = _worker.get()
        if worker_id is not None and not hasattr(record, "worker_id"):
            record.worker_id = worker_id
        return True


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        message = record.getMessage()
        extra = [
            f"{k}={getattr(record, k)}"
            for k in TASK_FIELDS
            if hasattr(record, k) and str(getattr(record, k)) not in message
        ]
        if not extra:
            return text
        first, sep, rest = text.partition("\n")
        return f"{first} [{' '.join(extra)}]{sep}{rest}"

    def formatException(self, ei: Any) -> str:
        return redact(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return redact(super().formatStack(stack_info))


def _json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    class Formatter(JsonFormatter):
        def formatException(self, ei: Any) -> Any:
            return redact(logging.Formatter.formatException(self, ei))

        def formatStack(self, stack_info: str) -> Any:
            return redact(stack_info)

    return Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        datefmt="%Y-%m-%dT%H:%M:%S%z",
    )


def configure_logging(args: argparse.Namespace | None = None, **overrides: str) -> None:
    """Send every log record to stderr, formatted as ``args`` (or overrides) say."""
    level = overrides.get("level") or getattr(args, "log_level", None) or "info"
    fmt = overrides.get("format") or getattr(args, "log_format", None) or DEFAULT_FORMAT
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_Context())
    if fmt == "json":
        handler.setFormatter(_json_formatter())
    else:
        handler.setFormatter(_TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


@contextmanager
def task_fields(task_id: str, task_type: str, worker_id: str) -> Iterator[None]:
    """Within the block, this thread's log records carry the task's fields."""
    token = enter_task_fields(task_id, task_type, worker_id)
    try:
        yield
    finally:
        _task.reset(token)


def enter_task_fields(
    task_id: str, task_type: str, worker_id: str
) -> contextvars.Token[dict[str, str] | None]:
    """:func:`task_fields` without the context manager (the executor's hot
    path): from now on; :func:`leave_task_fields` with the token ends it."""
    return _task.set({"task_id": task_id, "task_type": task_type, "worker_id": worker_id})


def leave_task_fields(token: contextvars.Token[dict[str, str] | None]) -> None:
    _task.reset(token)


@contextmanager
def worker_fields(worker_id: str) -> Iterator[None]:
    """Within the block, this thread's log records carry ``worker_id``; a
    thread started with ``contextvars.copy_context().run`` inside it too."""
    token = _worker.set(worker_id)
    try:
        yield
    finally:
        _worker.reset(token)
