"""--log-level / --log-format: one parser for every command, JSON lines with
the running task's fields, URL passwords masked."""

from __future__ import annotations

import argparse
import contextvars
import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from taskscale import envelope
from taskscale.logs import (
    add_logging_arguments,
    configure_logging,
    redact,
    task_fields,
    worker_fields,
)
from taskscale.tasks import TaskRegistry
from taskscale.worker.execution import Claimed, RetryPolicy, TaskRunner


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_logging_arguments(parser)
    return parser.parse_args(list(argv))


def test_flags_default_to_the_environment_and_are_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (parse().log_level, parse().log_format) == ("info", "text")
    assert parse("--log-level", "WARNING").log_level == "warning"
    assert parse("--log-level", "warn").log_level == "warning"
    monkeypatch.setenv("TASKSCALE_LOG_FORMAT", "json")
    monkeypatch.setenv("TASKSCALE_LOG_LEVEL", "debug")
    assert (parse().log_level, parse().log_format) == ("debug", "json")
    with pytest.raises(SystemExit) as exited:
        parse("--log-format", "xml")
    assert exited.value.code == 2
    assert "'xml' is not a log format: use one of text, json" in capsys.readouterr().err


def test_json_lines_carry_the_task_fields(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(format="json", level="info")
    log = logging.getLogger("taskscale.test")
    with task_fields("id1", "mail", "w-1"):
        log.info("sending %d", 3)
    log.warning("outside")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert lines[0]["message"] == "sending 3"
    assert (lines[0]["level"], lines[0]["logger"]) == ("INFO", "taskscale.test")
    assert (lines[0]["task_id"], lines[0]["task_type"], lines[0]["worker_id"]) == (
        "id1",
        "mail",
        "w-1",
    )
    assert "time" in lines[0]
    assert "task_id" not in lines[1] and lines[1]["message"] == "outside"


def test_a_failing_task_logs_one_json_record_with_its_fields_and_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken() -> None:
        raise RuntimeError("nope")

    registry = TaskRegistry()
    registry.register("broken", broken)
    runner = TaskRunner(registry, worker_id="w-9", retry=RetryPolicy(), max_lost=5)
    task_id, doc = envelope.build("broken", max_retries=0)
    configure_logging(format="json", level="info")
    outcome = runner.run(Claimed("broken", task_id, doc.encode(), 0))
    assert outcome.kind == "dead" and "RuntimeError" in outcome.traceback
    [record] = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert (record["task_id"], record["task_type"], record["worker_id"]) == (
        task_id,
        "broken",
        "w-9",
    )
    assert record["level"] == "ERROR"
    assert "RuntimeError: nope" in record["message"] and "Traceback" in record["message"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_url_passwords_are_masked(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(format=fmt, level="info")
    logging.getLogger("taskscale.test").warning("cannot reach %s", "redis://app:s3cret@h:6379/0")
    err = capsys.readouterr().err
    assert "s3cret" not in err
    assert "redis://app:***@h:6379/0" in err


def test_redact() -> None:
    assert redact("rediss://:pw@h/0 and redis+sentinel://u:p@a:1,b:2/m") == (
        "rediss://:***@h/0 and redis+sentinel://u:***@a:1,b:2/m"
    )
    assert redact("redis://h:6379/0 user@example.com") == "redis://h:6379/0 user@example.com"


def test_records_of_a_workers_threads_carry_its_id_as_a_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(format="json", level="info")
    log = logging.getLogger("taskscale.test")
    with worker_fields("w-7"):
        log.info("claimer waiting")
        thread = threading.Thread(target=contextvars.copy_context().run, args=(log.info, "x"))
        thread.start()
        thread.join(10)
        with task_fields("id2", "mail", "w-7"):
            log.info("in a task")
    log.info("after")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line.get("worker_id") for line in lines] == ["w-7", "w-7", "w-7", None]
    assert lines[2]["task_id"] == "id2"


def test_text_shows_a_field_in_brackets_unless_the_message_says_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(format="text", level="info")
    log = logging.getLogger("taskscale.test")
    with worker_fields("w-7"):
        log.info("worker w-7 serving a")
        log.info("Redis unavailable")
    first, second = capsys.readouterr().err.splitlines()
    assert first.endswith("worker w-7 serving a")
    assert second.endswith("Redis unavailable [worker_id=w-7]")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_url_passwords_are_masked_in_tracebacks_too(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(format=fmt, level="info")
    log = logging.getLogger("taskscale.test")
    try:
        raise ConnectionError("cannot reach redis://app:s3cret@h:6379/0?password=hunter2")
    except ConnectionError:
        log.exception("Redis trouble")
        log.error("again", stack_info=True, extra={"url": "x"})
    err = capsys.readouterr().err
    assert "s3cret" not in err and "hunter2" not in err
    assert "redis://app:***@h:6379/0?password=***" in err
    assert "Traceback" in err and "ConnectionError" in err


def test_a_traceback_rendered_by_another_handler_first_is_masked_as_well(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(format="text", level="info")
    first = logging.StreamHandler(io.StringIO())  # renders (and caches) exc_text first
    logger = logging.getLogger("taskscale.test.cached")
    logger.addHandler(first)
    try:
        try:
            raise ValueError("rediss://:pw-123@h/0")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(first)
    err = capsys.readouterr().err
    assert "pw-123" not in err and "rediss://:***@h/0" in err
