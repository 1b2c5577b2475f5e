"""Every JSON argument of the command line is checked against the limits of
taskscale/json_input.py before Redis is dialled: a document nested too
deeply, or too large, is one line and exit 2 -- never a RecursionError
traceback (issue 21, case 5)."""

from __future__ import annotations

import pytest

from support.redis_server import free_port
from taskscale.cli import main
from taskscale.json_input import MAX_JSON_BYTES, MAX_JSON_DEPTH, json_depth, parse_json

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads: RecursionError
DEEP_OBJECT = '{"a":' * 5_000 + "1" + "}" * 5_000


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: checked before dialling
    try:
        code = main([*argv, "--redis-url", dead])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).strip().splitlines()


@pytest.mark.parametrize(
    ("argv", "flag", "why"),
    [
        (["enqueue", "t", "--args", DEEP], "--args", f"nested more than {MAX_JSON_DEPTH} deep"),
        (["enqueue", "t", "--kwargs", DEEP_OBJECT], "--kwargs", "nested more than"),
        (["enqueue", "t", "--args", f'["{"x" * MAX_JSON_BYTES}"]'], "--args", "bytes, over"),
        (["schedules", "add", "s", "t", "--every", "60", "--args", DEEP], "--args", "nested"),
        (["schedules", "add", "s", "t", "--every", "60", "--kwargs", DEEP_OBJECT], "--kwargs", ""),
    ],
)
def test_deep_or_large_json_arguments_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, why: str
) -> None:
    code, lines = run(capsys, *argv)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"taskscale {argv[0]}: {flag} is ")
    assert why in lines[0]


def test_enqueue_max_bytes_raises_the_size_limit_of_its_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    big = f'["{"x" * MAX_JSON_BYTES}"]'
    code, lines = run(capsys, "enqueue", "t", "--args", big, "--max-bytes", str(4 * MAX_JSON_BYTES))
    assert code == 1 and "Redis" in lines[-1]  # got past the arguments to dialling


def test_the_limits() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_depth(at_limit) == MAX_JSON_DEPTH and parse_json(at_limit, "x") == eval(at_limit)
    assert json_depth('["[[[", {"a": "\\"]"}]') == 2  # brackets in strings don't nest
    for bad in ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "[NaN]", "[1e999]", "[1,"):
        with pytest.raises(ValueError):
            parse_json(bad, "x")
    with pytest.raises(ValueError, match="not UTF-8"):
        parse_json(b'["\xff"]', "the body")
