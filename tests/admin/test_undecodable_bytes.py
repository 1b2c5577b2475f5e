"""Envelopes whose bytes are not UTF-8 (a producer in another language, an
older version) never make a reader fail: ``taskscale dead list``,
``taskscale task`` and ``delayed list`` show each such byte as ``\\xNN`` and
go on with the other entries (issue 21, case 4: one such envelope made every
dead letter of its type unreadable)."""

from __future__ import annotations

import json

import pytest
import redis

from support.workers import run_taskscale
from taskscale import admin
from taskscale.keys import Keys
from taskscale.text import TOO_DEEP, loads_lenient, shown

pytestmark = pytest.mark.integration

#: An envelope as a careless producer writes it: Latin-1 and a stray byte.
BAD_ENVELOPE = b'{"id":"t-bad","type":"report","args":["caf\xe9 \xff"],"kwargs":{},"attempts":1}'
GOOD_ENVELOPE = b'{"id":"t-good","type":"report","args":[1],"kwargs":{},"attempts":0}'


def json_string(raw: bytes) -> bytes:
    """``raw`` as a JSON string the way Redis's cjson writes it: bytes kept."""
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def dead_record(envelope: bytes, error: bytes) -> bytes:
    """A dead letter as fail.lua writes one (cjson passes the bytes through)."""
    return (
        b'{"envelope":'
        + json_string(envelope)
        + b',"error":'
        + json_string(error)
        + b',"failed_ms":5}'
    )


@pytest.fixture
def stored(r: redis.Redis, keys: Keys) -> None:
    r.sadd(keys.types, "report")
    r.rpush(keys.dead("report"), dead_record(BAD_ENVELOPE, b"ValueError: bad \xfe"))
    r.rpush(keys.dead("report"), dead_record(GOOD_ENVELOPE, b"ValueError: fine"))
    r.rpush(keys.dead("report"), b"\xff\xfe not even JSON")
    r.zadd(keys.delayed("report"), {BAD_ENVELOPE.replace(b"t-bad", b"t-later"): 4_000_000_000_000})


def test_shown_escapes_undecodable_bytes_and_lone_surrogates() -> None:
    assert shown(b"caf\xc3\xa9 \xff") == "café \\xff"
    assert shown(loads_lenient(b'{"k\xfe":["\\ud800", 1]}')) == {"k\\xfe": ["\\ud800", 1]}
    assert loads_lenient(b"[" * 100_000) is None  # too deep for Python: not JSON here
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert shown(deep) == TOO_DEEP


def test_dead_list_shows_every_letter(r: redis.Redis, keys: Keys, stored: None) -> None:
    bad, good, garbage = admin.dead_list(r, keys, "report")
    assert bad.task_id == "t-bad"
    assert bad.fields["args"] == ["caf\\xe9 \\xff"]
    assert bad.error == "ValueError: bad \\xfe"
    assert "\\xff" in bad.envelope
    assert good.task_id == "t-good" and good.error == "ValueError: fine"
    assert garbage.task_id == "" and garbage.envelope == "\\xff\\xfe not even JSON"
    for letter in (bad, good, garbage):
        json.dumps(letter.fields) and letter.envelope.encode("utf-8")  # printable


def test_delayed_list_and_task_lookup(r: redis.Redis, keys: Keys, stored: None) -> None:
    [later] = admin.delayed_list(r, keys, "report")
    assert later.task_id == "t-later" and later.fields["args"] == ["caf\\xe9 \\xff"]
    info = admin.task_info(r, keys, "t-bad")
    assert info is not None and info.state == "dead" and info.error == "ValueError: bad \\xfe"
    r.rpush(keys.queue("report"), BAD_ENVELOPE.replace(b"t-bad", b"t-queued"))
    queued = admin.task_info(r, keys, "t-queued")
    assert queued is not None and queued.state == "queued" and "\\xff" in queued.envelope


def test_the_commands_print_them(redis_url: str, r: redis.Redis, stored: None) -> None:
    listed = run_taskscale(redis_url, "dead", "list", "report")
    assert listed.returncode == 0, listed.stderr
    assert "t-bad" in listed.stdout and "t-good" in listed.stdout and "\\xff" in listed.stdout
    as_json = run_taskscale(redis_url, "dead", "list", "report", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert [json.loads(line)["task_id"] for line in as_json.stdout.splitlines()] == [
        "t-bad",
        "t-good",
        "",
    ]
    task = run_taskscale(redis_url, "task", "t-bad")
    assert task.returncode == 0 and "ValueError: bad \\xfe" in task.stdout, task.stderr
    task_json = run_taskscale(redis_url, "task", "t-bad", "--json")
    assert json.loads(task_json.stdout)["envelope"].count("\\x") == 2
    delayed = run_taskscale(redis_url, "delayed", "list", "report")
    assert delayed.returncode == 0 and "t-later" in delayed.stdout, delayed.stderr
