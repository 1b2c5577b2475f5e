"""Every option can come from TASKSCALE_<OPTION>; the command line wins."""

from __future__ import annotations

import pytest

from taskscale.cli import build_parser
from taskscale.envdefaults import COMMAND_LINE_ONLY


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
