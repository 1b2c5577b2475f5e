"""--log-level / --log-format: one parser for every command, JSON lines with
the running task's fields, URL passwords masked."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator

import pytest

from taskscale import envelope
from taskscale.execution import Claimed, RetryPolicy, TaskRunner
from taskscale.logs import add_logging_arguments, configure_logging, redact, task_fields
from taskscale.tasks import TaskRegistry


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
