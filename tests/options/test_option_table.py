"""Task options are one table, ``taskscale.options.OPTIONS`` (pure: no Redis).

Each row names an option, its envelope field and unit, its check and its
default; writing the envelope, resolving a run and checking a value go by
it.  These tests hold the typed declarations (``TaskOptions``, ``Resolved``,
``@task``'s keywords) and docs/schema.md to the table, and check each
option's units and precedence with numbers written out here, so a row that
is wrong, or an option handled outside the table, fails.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest

from taskscale import tasks
from taskscale.options import (
    OPTION,
    OPTIONS,
    Resolved,
    TaskOptionArgs,
    TaskOptions,
    enqueue_fields,
    resolve,
)
from taskscale.rpc import CallOptions
from taskscale.tasks import TaskRegistry, task

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "schema.md"
NAMES = [option.name for option in OPTIONS]

#: option -> (a value in Python, its envelope field's value, the value read back)
SAMPLES: dict[str, tuple[Any, Any, Any]] = {
    "max_retries": (4, 4, 4),
    "retry_backoff": (0.5, 500, 0.5),
    "retry_backoff_max": (30, 30_000, 30.0),
    "timeout": (1.5, 1500, 1.5),
    "result_ttl": (60, 60, 60),
}
#: option -> another valid value (the decorator's, in the precedence test)
OTHERS: dict[str, Any] = {
    "max_retries": 0,
    "retry_backoff": (1.0, 2.0),
    "retry_backoff_max": 5.0,
    "timeout": 9.0,
    "result_ttl": 7,
}


def test_the_typed_declarations_name_the_tables_options_in_order() -> None:
    assert list(SAMPLES) == NAMES
    assert [f.name for f in dataclasses.fields(TaskOptions)] == NAMES
    assert [f.name for f in dataclasses.fields(Resolved)] == NAMES
    assert list(TaskOptionArgs.__annotations__) == NAMES
    assert typing.get_type_hints(TaskOptionArgs) == typing.get_type_hints(TaskOptions)


def test_task_takes_the_options_as_typed_keywords() -> None:
    [(_, keywords)] = [
        (name, p)
        for name, p in inspect.signature(task).parameters.items()
        if p.kind is p.VAR_KEYWORD
    ]
    assert keywords.annotation == "Unpack[TaskOptionArgs]"


@pytest.mark.parametrize("name", NAMES)
def test_task_declares_each_option(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    registry = TaskRegistry()
    monkeypatch.setattr(tasks, "registry", registry)
    value = SAMPLES[name][0]

    @task("table.probe", **{name: value})
    def probe() -> None: ...

    declared = registry.options("table.probe")
    assert declared == TaskOptions(**{name: value})
    assert getattr(declared, name) == value


@pytest.mark.parametrize("name", NAMES)
def test_each_option_is_written_and_read_back_in_its_units(name: str) -> None:
    value, written, read = SAMPLES[name]
    fields = TaskOptions(**{name: value}).envelope_fields()
    assert fields == {OPTION[name].field: written}
    assert getattr(resolve(fields, None), name) == read


def test_a_backoff_schedule_is_written_in_ms_and_read_back_in_seconds() -> None:
    fields = TaskOptions(retry_backoff=[0, 2.5]).envelope_fields()
    assert fields == {"retry_backoff_ms": [0, 2500]}
    got = resolve(fields, None)
    assert (got.retry_backoff, got.backoff_schedule_s, got.backoff_base_s) == (
        (0, 2.5),
        (0, 2.5),
        None,
    )


@pytest.mark.parametrize("name", NAMES)
def test_each_option_resolves_envelope_then_decorator_then_default(name: str) -> None:
    field = OPTION[name].field
    written = SAMPLES[name][1]
    declared = TaskOptions(**{name: OTHERS[name]})
    assert getattr(resolve({field: written}, declared), name) == SAMPLES[name][2]
    assert getattr(resolve({field: "junk"}, declared), name) == OTHERS[name]
    assert getattr(resolve({field: -5}, declared), name) == OTHERS[name]
    assert getattr(resolve({}, declared), name) == OTHERS[name]
    assert getattr(resolve({field: "junk"}, None), name) == OPTION[name].default


def test_resolved_defaults_are_the_tables() -> None:
    assert Resolved() == Resolved(**{o.name: o.default for o in OPTIONS})
    assert resolve({}, None) == Resolved()
    assert (Resolved().max_retries, Resolved().result_ttl) == (3, 300)


@pytest.mark.parametrize("name", NAMES)
def test_each_option_is_checked_by_its_row(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        TaskOptions(**{name: -1})
    with pytest.raises(ValueError, match=name):
        TaskOptions(**{name: "x"})  # type: ignore[arg-type]


def test_the_rpc_reply_ttl_is_the_result_ttl_option() -> None:
    with pytest.raises(ValueError, match="reply_ttl_s must be whole seconds, 1 to 10 years"):
        CallOptions(reply_ttl_s=10**12)
    with pytest.raises(TypeError, match="task_options must be a TaskOptions"):
        CallOptions(task_options={"timeout": 1})  # type: ignore[arg-type]


def test_enqueue_fields_give_max_retries_apart_and_the_argument_wins() -> None:
    options = TaskOptions(max_retries=2, timeout=1)
    assert enqueue_fields(options) == (2, {"timeout_ms": 1000})
    assert enqueue_fields(options, max_retries=5) == (5, {"timeout_ms": 1000})
    assert enqueue_fields(None, max_retries=1) == (1, {})
    with pytest.raises(TypeError, match="options must be a TaskOptions"):
        enqueue_fields({"timeout": 1})  # type: ignore[arg-type]


# --- docs/schema.md -----------------------------------------------------------------


def schema_text() -> str:
    return SCHEMA.read_text()


def test_schema_md_lists_the_option_fields_and_task_keywords() -> None:
    text = schema_text()
    listed = re.search(r"Options fields \((.*?)\) are resolved", text, re.S)
    assert listed is not None
    assert re.findall(r"`(\w+)`", listed.group(1)) == [o.field for o in OPTIONS]
    declared = re.search(r'`@task\("T", (.*?)\)`', text, re.S)
    assert declared is not None
    assert re.findall(r"(\w+)=…", declared.group(1)) == NAMES


def test_schema_md_has_a_row_per_option_field_with_its_default() -> None:
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", schema_text(), re.M)}
    for option in OPTIONS:
        assert option.field in rows, option.field
        if option.default is not None:
            assert f"else {option.default})" in rows[option.field], rows[option.field]
