"""Wrong input is answered with a sentence, never with Python internals.

The command line checks what the user typed before it dials Redis, so these
run against a port nothing listens on: a test that reached Redis would fail
with "cannot reach Redis" instead of the message it expects.
"""

from __future__ import annotations

import math
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from support.redis_server import free_port
from taskscale import __version__
from taskscale.cli import main
from taskscale.keys import Keys
from taskscale.producer import Producer, delay_to_ms


@pytest.fixture()
def dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("delay", ["nan", "inf", "-inf", "-1", "soon"])
def test_enqueue_delay_must_be_finite_seconds(
    capsys: pytest.CaptureFixture[str], dead_url: str, delay: str
) -> None:
    code, text = cli(capsys, "enqueue", "t", f"--delay={delay}", "--redis-url", dead_url)
    assert code == 2
    assert f"argument --delay: {delay!r}" in text
    assert "convert" not in text and "Traceback" not in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--priority", "12"], "invalid priority 12"),
        (["--priority", "urgent"], "invalid priority 'urgent'"),
        (["--max-retries", "-3"], "argument --max-retries: '-3' must be at least 0"),
        (["--timeout", "0"], "--timeout: timeout must be > 0 seconds"),
        (["--args", "{"], "--args is not valid JSON"),
        (["--kwargs", "[1]"], "--kwargs must be a JSON object"),
        (["--count", "0"], "argument --count: '0' must be at least 1"),
    ],
)
def test_enqueue_bad_options_are_named_before_redis_is_dialled(
    capsys: pytest.CaptureFixture[str], dead_url: str, argv: list[str], message: str
) -> None:
    code, text = cli(capsys, "enqueue", "t", *argv, "--redis-url", dead_url)
    assert code == 2
    assert message in text
    assert "cannot reach Redis" not in text


def test_enqueue_bad_type_name(capsys: pytest.CaptureFixture[str], dead_url: str) -> None:
    code, text = cli(capsys, "enqueue", "bad type!", "--redis-url", dead_url)
    assert code == 2
    assert "invalid task type 'bad type!'" in text


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--threads", "0"),
        ("--async-slots", "0"),
        ("--lease", "nan"),
        ("--grace", "-5"),
        ("--max-lost", "x"),
    ],
)
def test_worker_flags_are_checked(
    capsys: pytest.CaptureFixture[str], dead_url: str, flag: str, value: str
) -> None:
    code, text = cli(capsys, "worker", "--types", "a", flag, value, "--redis-url", dead_url)
    assert code == 2
    assert f"argument {flag}: {value!r}" in text


def test_bad_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = cli(capsys, "status", "--redis-url", "foo://x")
    assert code == 2
    assert text.strip().splitlines() == [
        "taskscale status: invalid Redis URL 'foo://x': the scheme must be one of redis://, "
        "rediss://, unix://, redis+sentinel://, rediss+sentinel://, redis+cluster://, "
        "rediss+cluster://"
    ]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = cli(capsys, "--version")
    assert code == 0
    assert text.strip() == f"taskscale {__version__}"
    assert __version__[0].isdigit()


@pytest.mark.parametrize("delay", [math.nan, math.inf, -0.5, "5", True])
def test_api_delay_refused_before_any_redis_call(dead_url: str, delay: object) -> None:
    producer = Producer(redis.Redis.from_url(dead_url), keys=Keys("t"))
    with pytest.raises(ValueError, match="delay must be a"):
        producer.enqueue("t", delay=delay)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delay must be a"):
        producer.enqueue_many("t", [[1]], delay=delay)  # type: ignore[arg-type]


def test_delay_to_ms() -> None:
    assert delay_to_ms(None) == 0
    assert delay_to_ms(0) == 0
    assert delay_to_ms(0.0001) == 1  # a positive delay never rounds down to "now"
    assert delay_to_ms(1.5) == 1500


def test_enqueue_gives_up_on_a_dead_redis_with_one_line_naming_where(dead_url: str) -> None:
    from taskscale.connection import RedisUnavailable
    from taskscale.producer import ProducerSettings

    assert ProducerSettings().retry_for_s <= 5  # fails fast by default
    url = dead_url.replace("redis://", "redis://app:s3cret-pw@")
    producer = Producer(url, keys=Keys("t"), settings=ProducerSettings(retry_for_s=0.3))
    with pytest.raises(RedisUnavailable) as caught:
        producer.enqueue("t", 1)
    message = str(caught.value)
    port = dead_url.rsplit(":", 1)[1].split("/")[0]
    assert message.startswith("could not enqueue t within 0.3 s: cannot reach Redis at 127.0.0.1:")
    assert f":{port}/0" in message and "s3cret-pw" not in message
    assert "\n" not in message


HUGE = "99999999999999999999"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enqueue", "t", "--count", HUGE], f"argument --count: {HUGE!r} must be at most"),
        (["enqueue", "t", "--delay", "1e30"], "argument --delay: '1e30' must be at most"),
        (["enqueue", "t", "--max-bytes", "-1"], "argument --max-bytes: '-1' must be at least 1"),
        (["worker", "--types", "t", "--threads", HUGE], "argument --threads: "),
        (["worker", "--types", "t", "--metrics-port", "99999"], "must be at most 65535"),
        (["worker", "--types", "t", "--lease", "1e300"], "argument --lease: '1e300' must be"),
        (["scheduler", "--batch", HUGE], "argument --batch: "),
        (["dead", "list", "t", "--count", "-1"], "argument --count: '-1' must be at least 1"),
        (["dead", "list", "t", "--start", "-1"], "argument --start: '-1' must be at least 0"),
        (["delayed", "list", "t", "--count", "0"], "argument --count: '0' must be at least 1"),
        (["controller", "--metrics-port", "-1"], "argument --metrics-port: '-1' must be"),
    ],
)
def test_out_of_range_numbers_are_one_line(
    capsys: pytest.CaptureFixture[str], dead_url: str, argv: list[str], message: str
) -> None:
    code, text = cli(capsys, *argv, "--redis-url", dead_url)
    assert code == 2
    assert message in text
    assert "Traceback" not in text and "OverflowError" not in text


def test_a_database_that_is_not_a_number_is_refused(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    # redis-py would quietly use database 0 for it.
    code, text = cli(capsys, "status", "--redis-url", redis_url.rsplit("/", 1)[0] + "/abc")
    assert code == 2
    assert "database 'abc' is not a number" in text


def test_api_wrong_values_are_sentences(redis_url: str) -> None:
    from taskscale.fanout import submit_fanout
    from taskscale.rpc import CallOptions, call

    with pytest.raises(ValueError, match="at most 315360000 s"):
        delay_to_ms(1e30)
    with pytest.raises(ValueError, match="invalid task type 5"):
        Producer(redis.Redis.from_url(redis_url), keys=Keys("t")).enqueue(5)  # type: ignore[arg-type]
    # A NaN timeout used to block forever; a negative one timed out at once.
    for timeout in (math.nan, -1.0, "5"):
        with pytest.raises(ValueError, match="timeout must be"):
            call(redis_url, "t", timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reply_ttl_s must be"):
        CallOptions(reply_ttl_s=-1)
    with pytest.raises(TypeError, match="a Redis URL or None"):
        call(5, "t", timeout=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="arg_sets must be a sequence"):
        submit_fanout(redis_url, "t", None, limit=2)  # type: ignore[arg-type]


# --- ports that can't be listened on ---------------------------------------------------------

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture()
def keep_signal_handlers() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture()
def taken_port() -> Iterator[int]:
    """A port another socket listens on (every address, as the worker binds)."""
    with socket.socket() as blocker:
        blocker.bind(("0.0.0.0", 0))
        blocker.listen()
        yield blocker.getsockname()[1]


def _listening_command(
    command: str, redis_url: str, tmp_path: Path, port: int, host: str | None
) -> list[str]:
    if command == "controller":
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(KUBECONFIG)
        argv = ["controller", "--kubeconfig", str(kubeconfig), "--metrics-port", str(port)]
        return [*argv, "--metrics-host", host] if host else argv
    if command == "dashboard":
        argv = ["dashboard", "--port", str(port), "--redis-url", redis_url]
        return [*argv, "--bind", host] if host else argv
    assert host is None  # worker and scheduler bind every address
    own = ["--types", "noop", "--import", "taskscale.examples"] if command == "worker" else []
    return [command, *own, "--metrics-port", str(port), "--redis-url", redis_url]


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    if argv[0] != "worker":
        return cli(capsys, *argv)
    # the worker installs signal handlers: keep them out of the test process
    done = subprocess.run(
        [sys.executable, "-m", "taskscale.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("command", ["worker", "scheduler", "controller", "dashboard"])
def test_a_port_in_use_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    tmp_path: Path,
    taken_port: int,
    command: str,
) -> None:
    argv = _listening_command(command, redis_url, tmp_path, taken_port, None)
    code, text = _run_cli(argv, capsys)
    assert code == 1, text
    lines = text.strip().splitlines()
    assert lines[-1].startswith(f"taskscale {command}: cannot listen on "), text
    assert lines[-1].endswith(f":{taken_port}: Address already in use")
    assert "Traceback" not in text and "OSError" not in text


@pytest.mark.parametrize("command", ["controller", "dashboard"])
@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("nosuch.invalid", "cannot listen on nosuch.invalid:"),
        ("192.0.2.1", "Cannot assign requested address"),  # TEST-NET: never this machine's
    ],
)
def test_a_host_that_is_not_this_machines_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    tmp_path: Path,
    command: str,
    host: str,
    reason: str,
) -> None:
    argv = _listening_command(command, redis_url, tmp_path, free_port(), host)
    code, text = cli(capsys, *argv)
    assert code == 2, text
    [line] = text.strip().splitlines()
    assert line.startswith(f"taskscale {command}: cannot listen on {host}:")
    assert reason in line
    assert "Traceback" not in text and "gaierror" not in text


@pytest.mark.parametrize(
    "argv",
    [
        ["scheduler", "--metrics-port", "70000"],
        ["scheduler", "--metrics-port", "-1"],
        ["dashboard", "--port", "1000000000"],
        ["dashboard", "--port", "65536"],
    ],
)
def test_ports_out_of_range_are_refused_by_the_port_validator(
    capsys: pytest.CaptureFixture[str], dead_url: str, argv: list[str]
) -> None:
    code, text = cli(capsys, *argv, "--redis-url", dead_url)
    assert code == 2
    assert f"argument {argv[1]}: {argv[2]!r} must be" in text
    assert "OverflowError" not in text and "Traceback" not in text


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this machine")
def test_the_metrics_port_binds_an_ipv6_host() -> None:
    import time
    import urllib.request

    from prometheus_client import CollectorRegistry

    from taskscale.health import HealthState, MetricsServer

    health = HealthState(clock=time.monotonic)
    server = MetricsServer(CollectorRegistry(), health, host="::1", port=0).start()
    try:
        with urllib.request.urlopen(f"http://[::1]:{server.port}/healthz", timeout=30) as reply:
            assert reply.read() == b"ok\n"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # reached Redis and came back as "WAIT ... value is not an integer or out of range"
        (["enqueue", "t", "--wait-replicas", HUGE], "argument --wait-replicas: "),
        # json.loads takes NaN and 1e999; the envelope then failed with a task id it never got
        (["enqueue", "t", "--args", "[1, NaN]"], "--args is not valid JSON: NaN is not a JSON"),
        (["enqueue", "t", "--kwargs", '{"a": -Infinity}'], "--kwargs is not valid JSON: -Inf"),
        (["enqueue", "t", "--args", "[1e999]"], "1e999 is too large for a JSON number"),
        (["schedules", "add", "n", "t", "--every", "5", "--args", "[NaN]"], "not valid JSON"),
        # a reap every 0 s and a sleep of 0 s were busy loops on Redis
        (["scheduler", "--lease", "0"], "--lease must be a finite number of seconds > 0"),
        (["scheduler", "--max-sleep", "0"], "--max-sleep must be a finite number of seconds > 0"),
        # importlib's "Empty module name" / relative-import TypeError
        (["worker", "--types", "t", "--import", ""], "invalid task module name ''"),
        (["worker", "--types", "t", "--import", ".tasks"], "invalid task module name '.tasks'"),
    ],
)
@pytest.mark.usefixtures("keep_signal_handlers")  # the worker command sets its own
def test_more_wrong_values_are_one_line_before_redis_is_dialled(
    capsys: pytest.CaptureFixture[str], dead_url: str, argv: list[str], message: str
) -> None:
    code, text = cli(capsys, *argv, "--redis-url", dead_url)
    assert code == 2, text
    assert message in text
    assert "cannot reach Redis" not in text and "Traceback" not in text
