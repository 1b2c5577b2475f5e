"""A command-line flag's default is read from where the default is defined.

A flag that sets a settings dataclass's field takes that field's default
(``cli.common.add_setting``); the others read the constant or the function
default they share with the API.  These tests change the source and expect
the flag to follow, or compare each flag with its source, so a number
restated in a parser fails here.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from typing import Any

import pytest

from taskscale.cli import build_parser
from taskscale.controller.cli import DEFAULT_LEASE_NAME
from taskscale.dashboard.server import serve_in_thread
from taskscale.demo.load import DemoSettings
from taskscale.health import METRICS_HOST
from taskscale.keys import DEFAULT_PRIORITY, parse_priority
from taskscale.limits import set_limits
from taskscale.logs import DEFAULT_FORMAT
from taskscale.options import DEFAULT_MAX_RETRIES
from taskscale.producer import ProducerSettings
from taskscale.scheduling.scheduler import SchedulerSettings
from taskscale.scheduling.scheduler_metrics import SchedulerMetrics
from taskscale.worker.settings import WorkerSettings

ENV = ("TASKSCALE_THREADS", "TASKSCALE_LEASE", "TASKSCALE_BURST", "TASKSCALE_BIND")


@pytest.fixture(autouse=True)
def no_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


#: (argv, dest, settings dataclass, field): the flags add_setting makes
SETTINGS = [
    (["worker", "--types", "t"], "threads", WorkerSettings, "threads"),
    (["worker", "--types", "t"], "async_slots", WorkerSettings, "async_slots"),
    (["worker", "--types", "t"], "lease", WorkerSettings, "lease_s"),
    (["worker", "--types", "t"], "heartbeat", WorkerSettings, "heartbeat_s"),
    (["worker", "--types", "t"], "grace", WorkerSettings, "grace_s"),
    (["worker", "--types", "t"], "idle_wait", WorkerSettings, "idle_wait_s"),
    (["worker", "--types", "t"], "max_lost", WorkerSettings, "max_lost"),
    (["worker", "--types", "t"], "dead_letter_cap", WorkerSettings, "dead_letter_cap"),
    (["scheduler"], "lease", SchedulerSettings, "lease_s"),
    (["scheduler"], "batch", SchedulerSettings, "promote_batch"),
    (["scheduler"], "max_sleep", SchedulerSettings, "max_sleep_s"),
    (["enqueue", "t"], "max_bytes", ProducerSettings, "max_payload_bytes"),
    (["enqueue", "t"], "wait_replicas", ProducerSettings, "wait_replicas"),
]


@pytest.mark.parametrize(
    ("argv", "dest", "settings", "field"), SETTINGS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_settings_flag_follows_its_dataclass_default(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], dest: str, settings: type, field: str
) -> None:
    declared = {f.name: f for f in dataclasses.fields(settings)}[field]
    assert getattr(parse(*argv), dest) == declared.default
    changed: Any = declared.default + 3
    monkeypatch.setattr(declared, "default", changed)
    assert getattr(parse(*argv), dest) == changed


def test_a_settings_flags_help_shows_its_default_as_written() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    enqueue = sub.choices["enqueue"].format_help()
    assert f"(default {ProducerSettings().max_payload_bytes})" in enqueue  # not 1.04858e+06
    worker = sub.choices["worker"].format_help()
    assert f"(default {WorkerSettings(types=('t',)).lease_s:g})" in worker


def test_the_other_flags_read_their_shared_defaults() -> None:
    assert parse_priority(parse("enqueue", "t").priority) == DEFAULT_PRIORITY
    schedule = parse("schedules", "add", "n", "t", "--every", "5")
    assert parse_priority(schedule.priority) == DEFAULT_PRIORITY
    assert (
        parse("limits", "set", "t").burst
        == inspect.signature(set_limits).parameters["burst"].default
    )
    host = inspect.signature(serve_in_thread).parameters["host"].default
    assert parse("dashboard").bind == host
    serve = inspect.signature(SchedulerMetrics.serve).parameters["host"].default
    assert parse("controller").metrics_host == serve == METRICS_HOST
    assert parse("controller").leader_election_id == DEFAULT_LEASE_NAME
    assert parse("status").log_format == DEFAULT_FORMAT == DemoSettings().log_format


def test_schedule_add_says_the_runtime_default_of_max_retries() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    schedules = sub.choices["schedules"]
    inner = next(a for a in schedules._actions if isinstance(a, argparse._SubParsersAction))
    assert f"else {DEFAULT_MAX_RETRIES})" in inner.choices["add"].format_help()
