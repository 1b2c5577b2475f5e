"""The helpers there is one of (issue 20): what each must do for all its callers.

tests/test_one_way.py checks no second copy comes back; this checks the one
copy is right (pure: no Redis).
"""

from __future__ import annotations

import random

import pytest
import redis

from taskscale.backoff import equal_jitter, exponential, full_jitter, spread
from taskscale.connection import (
    DEFAULT_REDIS_URL,
    REDIS_URL_ENV,
    ConnectionSettings,
    connect,
    redis_url_from_env,
)
from taskscale.errors import describe_error, one_line
from taskscale.retrying import RetrySettings, call_with_retries, retrying
from taskscale.text import as_text


def test_as_text_decodes_bytes_and_passes_text_through() -> None:
    assert as_text(b"caf\xc3\xa9") == "café"
    assert as_text("already") == "already"
    assert as_text(42) == "42"  # an integer reply, e.g. a count


def test_as_text_is_strict_unless_told() -> None:
    with pytest.raises(UnicodeDecodeError):
        as_text(b"\xff")
    # another library's keys (Celery, RQ) may hold anything: read, not refused
    assert as_text(b"a\xffb", errors="replace") == "a\ufffdb"


def test_retrying_retries_transient_errors_until_the_call_succeeds() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise redis.ConnectionError("refused")
        return "ok"

    assert retrying(flaky, max_wait_s=0.01) == "ok"
    assert len(calls) == 3


def test_retrying_raises_other_errors_at_once_and_stops_when_told() -> None:
    calls = []

    def wrong() -> None:
        calls.append(1)
        raise redis.ResponseError("WRONGTYPE")

    with pytest.raises(redis.ResponseError):
        retrying(wrong)
    assert len(calls) == 1

    def down() -> None:
        calls.append(1)
        raise redis.TimeoutError("timed out")

    with pytest.raises(redis.TimeoutError):
        retrying(down, give_up_when=lambda: len(calls) >= 4, max_wait_s=0.01)
    assert len(calls) == 4


def test_call_with_retries_shows_every_failed_attempt_and_stops_at_the_limit() -> None:
    seen: list[BaseException] = []

    def down() -> None:
        raise OSError("no route")

    with pytest.raises(OSError):
        call_with_retries(
            down,
            settings=RetrySettings(attempts=3, initial_s=0.001, max_s=0.002),
            retry_if=lambda exc: isinstance(exc, OSError),
            on_error=seen.append,
        )
    assert len(seen) == 3  # each attempt counted, none hidden by the retry
    seen.clear()
    with pytest.raises(ValueError):
        call_with_retries(
            lambda: int("x"),
            settings=RetrySettings(attempts=3, initial_s=0.001, max_s=0.002),
            retry_if=lambda exc: isinstance(exc, OSError),
            on_error=seen.append,
        )
    assert len(seen) == 1  # not retried: seen once


def test_one_line_is_the_first_line_or_the_class_name() -> None:
    assert one_line(ValueError("bad port\nmore detail")) == "bad port"
    assert one_line(ValueError("  \n")) == "ValueError"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(RuntimeError("unexpected\nx"), typed=True) == "RuntimeError: unexpected"
    assert one_line(RuntimeError(), typed=True) == "RuntimeError"


def test_one_line_masks_passwords() -> None:
    exc = ValueError("cannot use redis://app:s3cret@redis:6379/0 today")
    assert one_line(exc) == "cannot use redis://app:***@redis:6379/0 today"
    # a URL too malformed for the pattern (a '/' in the password) is masked
    # when the caller names it
    bad = "redis://app:pa/ss@redis:6379"
    assert "pa/ss" not in one_line(OSError(f"no {bad}"), url=bad)
    assert "pa/ss" in one_line(OSError(f"no {bad}"))  # the reason the url argument exists


def test_describe_error_says_what_and_where() -> None:
    client = connect("redis://db.example:6390/2")
    refused = redis.ConnectionError("Error 111 connecting.\nsecond line")
    assert describe_error(refused, client=client) == (
        "cannot reach Redis at db.example:6390/2: Error 111 connecting."
    )
    wrong = redis.ResponseError("WRONGTYPE Operation against a key")
    assert describe_error(wrong).startswith("a taskscale key in Redis holds the wrong type")
    assert describe_error(redis.AuthenticationError("invalid password")) == (
        "Redis refused the credentials: invalid password"
    )
    assert describe_error(redis.ResponseError("ERR x")) == "Redis rejected a command: ERR x"
    assert describe_error(redis.DataError("")) == "Redis error: DataError"


def test_exponential_grows_by_its_factor_up_to_the_cap() -> None:
    delays = [exponential(n, base_s=0.5, cap_s=4.0) for n in range(7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert exponential(-3, base_s=0.5, cap_s=4.0) == 0.5  # before the first failure
    assert exponential(2, base_s=1.0, cap_s=100.0, factor=3.0) == 9.0


def test_exponential_is_never_above_the_cap_even_for_huge_counts() -> None:
    for attempt in (0, 1, 10, 63, 64, 1023, 1024, 10**6):
        for base_s, cap_s, factor in ((0.05, 5.0, 2.0), (1.0, 3600.0, 1.5), (10.0, 1.0, 2.0)):
            delay = exponential(attempt, base_s=base_s, cap_s=cap_s, factor=factor)
            assert 0 < delay <= cap_s
    assert exponential(10**6, base_s=1.0, cap_s=30.0) == 30.0  # no OverflowError


def test_the_jitters_stay_in_their_ranges() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        delay = exponential(rng.randrange(0, 12), base_s=0.1, cap_s=5.0)
        assert 0 <= full_jitter(delay, rng.random) < delay
        assert delay / 2 <= equal_jitter(delay, rng.random) < delay
        assert delay * 0.8 <= spread(delay, 0.2, rng.random) <= delay * 1.2
    # the ends of the random source map to the ends of each range
    assert full_jitter(2.0, lambda: 0.0) == 0.0
    assert equal_jitter(2.0, lambda: 0.0) == 1.0
    assert equal_jitter(2.0, lambda: 0.999) == pytest.approx(1.999)
    assert spread(2.0, 0.1, lambda: 0.0) == pytest.approx(1.8)
    assert spread(2.0, 0.1, lambda: 0.5) == 2.0
    assert spread(2.0, 0.0, random.random) == 2.0  # no jitter: exact


def test_the_callers_keep_their_numbers() -> None:
    from taskscale.worker.execution import RetryPolicy
    from taskscale.worker.supervisor import RestartPolicy

    # the supervisor: 0.5 s doubled per crash in a row, at most 30 s, no jitter
    assert [RestartPolicy().delay(n) for n in (1, 2, 3, 7, 8, 50)] == [
        0.5,
        1.0,
        2.0,
        30.0,
        30.0,
        30.0,
    ]
    # a failed task: base * factor ** attempts, capped, then +-jitter
    policy = RetryPolicy(base_s=1.0, factor=3.0, cap_s=100.0, jitter=0.0)
    assert [policy.backoff_ms(a) for a in range(6)] == [1000, 3000, 9000, 27000, 81000, 100000]
    assert policy.backoff_ms(10**6) == 100000


def test_the_redis_url_comes_from_the_argument_the_variable_or_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    assert redis_url_from_env() == DEFAULT_REDIS_URL
    assert redis_url_from_env(default=None) is None
    monkeypatch.setenv(REDIS_URL_ENV, "")  # empty counts as unset
    assert redis_url_from_env() == DEFAULT_REDIS_URL
    monkeypatch.setenv(REDIS_URL_ENV, "redis://env:6379/1")
    assert redis_url_from_env() == "redis://env:6379/1"
    assert redis_url_from_env(default=None) == "redis://env:6379/1"
    assert redis_url_from_env("redis://given:6379/2") == "redis://given:6379/2"
    assert ConnectionSettings.from_env().url == "redis://env:6379/1"


def test_every_subcommand_but_the_demo_takes_the_variable_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from taskscale.cli import build_parser

    monkeypatch.setenv(REDIS_URL_ENV, "redis://env:6379/1")
    parser = build_parser()
    assert parser.parse_args(["status"]).redis_url == "redis://env:6379/1"
    assert parser.parse_args(["worker", "--types", "a"]).redis_url == "redis://env:6379/1"
    assert parser.parse_args(["status", "--redis-url", "redis://flag:1/0"]).redis_url == (
        "redis://flag:1/0"
    )
    assert parser.parse_args(["demo"]).redis_url is None  # the demo starts its own Redis
    # read once, by the option's definition: the generic TASKSCALE_<OPTION>
    # reader leaves --redis-url alone
    import argparse

    from taskscale.cli.envdefaults import apply_env_defaults

    bare = argparse.ArgumentParser()
    bare.add_argument("--redis-url", default="redis://own:6379/0")
    apply_env_defaults(bare, {REDIS_URL_ENV: "redis://generic:6379/0"})
    assert bare.parse_args([]).redis_url == "redis://own:6379/0"
