"""The console shows dead letters and delayed tasks whose bytes are not
UTF-8, escaped, instead of answering 500 (issue 21, case 4)."""

from __future__ import annotations

import pytest
import redis
from dashhelpers import KEYS, dashboard, get

pytestmark = pytest.mark.integration

BAD = b'{"id":"t-bad","type":"report","args":["caf\xe9 \xff"],"kwargs":{},"attempts":1}'


def test_pages_and_api_show_undecodable_bytes_escaped(redis_url: str, r: redis.Redis) -> None:
    record = b'{"envelope":"' + BAD.replace(b'"', b'\\"') + b'","error":"E: \xfe","failed_ms":5}'
    r.sadd(KEYS.types, "report")
    r.rpush(KEYS.dead("report"), record, b"\xff not JSON")
    r.zadd(KEYS.delayed("report"), {BAD.replace(b"t-bad", b"t-later"): 4_000_000_000_000})
    with dashboard(redis_url) as running:
        code, page, _ = get(running.url, "/dead/report")
        assert code == 200 and "t-bad" in page and "\\xff" in page
        code, doc, _ = get(running.url, "/api/dead/report")
        assert code == 200
        assert [d["id"] for d in doc["letters"]] == ["t-bad", ""]
        assert doc["letters"][0]["args"] == ["caf\\xe9 \\xff"]
        assert doc["letters"][0]["error"] == "E: \\xfe"
        code, page, _ = get(running.url, "/delayed/report")
        assert code == 200 and "t-later" in page
        code, doc, _ = get(running.url, "/api/delayed/report")
        assert code == 200 and doc["tasks"][0]["args"] == ["caf\\xe9 \\xff"]
        code, doc, _ = get(running.url, "/api/tasks/t-bad")
        assert code == 200 and doc["state"] == "dead" and doc["error"] == "E: \\xfe"
        code, page, _ = get(running.url, "/types/report")
        assert code == 200
