"""Every option can come from TASKSCALE_<OPTION>; the command line wins."""

from __future__ import annotations

import pytest

from taskscale.cli import build_parser
from taskscale.cli.envdefaults import COMMAND_LINE_ONLY


def parse(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], *argv: str) -> object:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_parser().parse_args(list(argv))


def test_env_sets_defaults_of_every_subcommand(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "TASKSCALE_THREADS": "8",
        "TASKSCALE_LEASE": "20",
        "TASKSCALE_IMPORT": "app.tasks, app.more",
        "TASKSCALE_JSON": "yes",
        "TASKSCALE_WATCH_NAMESPACE": "jobs",
    }
    worker = parse(monkeypatch, env, "worker", "--types", "a")
    assert (worker.threads, worker.lease, worker.imports) == (8, 20.0, ["app.tasks", "app.more"])
    assert parse(monkeypatch, env, "status").json is True
    assert parse(monkeypatch, env, "controller").watch_namespace == "jobs"


def test_the_command_line_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    args = parse(
        monkeypatch, {"TASKSCALE_THREADS": "8"}, "worker", "--types", "a", "--threads", "2"
    )
    assert args.threads == 2


def test_a_bad_env_value_is_refused_like_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(monkeypatch, {"TASKSCALE_THREADS": "zero"}, "worker", "--types", "a")
    assert exited.value.code == 2
    assert "argument --threads: 'zero' is not a whole number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(monkeypatch, {"TASKSCALE_JSON": "maybe"}, "status")


def test_demo_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    args = parse(monkeypatch, {"TASKSCALE_REDIS_URL": "redis://prod:6379/0"}, "demo")
    assert args.redis_url is None  # the demo starts its own Redis


def test_destructive_flags_come_from_the_command_line_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {"TASKSCALE_FORCE": "1", "TASKSCALE_DELAYED": "yes", "TASKSCALE_NAMESPACE": "jobs"}
    forget = parse(monkeypatch, env, "types", "forget", "t")
    assert forget.force is False and forget.namespace == "jobs"  # the rest still applies
    purge = parse(monkeypatch, env, "queue", "purge", "t")
    assert purge.delayed is False and purge.namespace == "jobs"
    assert parse(monkeypatch, env, "types", "forget", "t", "--force").force is True
    assert parse(monkeypatch, env, "queue", "purge", "t", "--delayed").delayed is True


def test_every_command_line_only_flag_names_a_real_option() -> None:
    """A renamed subcommand or flag must not silently drop out of the list."""
    import argparse

    def subparser(path: tuple[str, ...]) -> argparse.ArgumentParser:
        parser = build_parser()
        for name in path:
            [subs] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            parser = subs.choices[name]
        return parser

    assert COMMAND_LINE_ONLY
    for path, options in COMMAND_LINE_ONLY.items():
        declared = {o for a in subparser(path)._actions for o in a.option_strings}
        assert options <= declared, (path, options - declared)


def test_a_bad_env_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(monkeypatch, {"TASKSCALE_DEAD_LETTER_CAP": "abc"}, "worker", "--types", "a")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert (
        "argument --dead-letter-cap: 'abc' is not a whole number "
        "(from TASKSCALE_DEAD_LETTER_CAP)" in err
    )
    assert "ValueError" not in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        parse(monkeypatch, {"TASKSCALE_DEAD_LETTER_CAP": "-1"}, "worker", "--types", "a")
    assert "'-1' must be at least 0 (from TASKSCALE_DEAD_LETTER_CAP)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(monkeypatch, {"TASKSCALE_JSON": "maybe"}, "status")
    assert "(from TASKSCALE_JSON)" in capsys.readouterr().err


def test_the_same_value_typed_on_the_command_line_is_not_blamed_on_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(monkeypatch, {"TASKSCALE_THREADS": "x"}, "worker", "--types", "a", "--threads", "x")
    err = capsys.readouterr().err
    assert "argument --threads: 'x' is not a whole number" in err
    assert "TASKSCALE_THREADS" not in err


@pytest.mark.parametrize(
    "env",
    [
        {"TASKSCALE_DEAD_LETTER_CAP": "abc"},
        {"TASKSCALE_JSON": "maybe"},
        {"TASKSCALE_METRICS_PORT": "99999"},
        {"TASKSCALE_LOG_FORMAT": "xml"},
    ],
)
def test_a_bad_variable_of_one_command_breaks_neither_version_nor_another_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> None:
    from taskscale import __version__

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"taskscale {__version__}"
    assert build_parser().parse_args(["crd"]).command == "crd"


def test_env_values_arrive_as_their_type(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"TASKSCALE_DEAD_LETTER_CAP": "7", "TASKSCALE_JSON": "off", "TASKSCALE_WORKER_ID": "w1"}
    worker = parse(monkeypatch, env, "worker", "--types", "a")
    assert worker.dead_letter_cap == 7
    assert type(worker.worker_id) is str and worker.worker_id == "w1"
    assert parse(monkeypatch, env, "status").json is False
