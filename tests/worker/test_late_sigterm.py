"""A stop signal that arrives late in a stop -- after the worker has returned
its tasks, while the interpreter unloads -- must not turn a clean exit 0 into
death by the signal (143): docs/operating.md, "A second SIGTERM skips the
wait" (issue 21, case 10)."""

from __future__ import annotations

import signal
import time

import pytest

from support.workers import example_worker

pytestmark = [pytest.mark.integration]


def test_sigterms_until_it_has_exited_still_exit_zero(redis_url: str) -> None:
    proc = example_worker(redis_url, "sleep", "--threads", "1", "--grace", "5")
    try:
        assert proc.stderr is not None
        for _ in range(200):
            if b"serving" in proc.stderr.readline():
                break
        proc.send_signal(signal.SIGTERM)
        for _ in range(200):  # its stop is done: only the interpreter's exit is left
            if b"stopped;" in proc.stderr.readline():
                break
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGTERM)  # through the whole teardown
            time.sleep(0.005)
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
