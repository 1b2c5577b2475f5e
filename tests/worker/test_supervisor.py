"""The supervisor's parts on their own: the children's command line, the
restart backoff, and the process loop with small real child processes
(no Redis: ``return_tasks`` records what it was asked)."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from support.waiting import wait_until
from taskscale.cli import build_parser
from taskscale.worker.supervisor import RestartPolicy, Supervisor, child_argv, child_id

PER_CHILD = {"processes", "worker_id", "metrics_port", "redis_url"}


def worker_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    args = build_parser().parse_args(argv)
    parser: argparse.ArgumentParser = args.worker_parser
    return parser, args


def test_a_child_gets_every_option_but_the_per_child_ones() -> None:
    parser, args = worker_parser(
        [
            "worker",
            "--redis-url=redis://secret@127.0.0.1:1/0",
            "--types=a,b",
            "--threads=3",
            "--import=m1",
            "--import=m2",
            "--lease=7.5",
            "--grace=0",
            "--log-format=json",
            "--worker-id=base",
            "--metrics-port=9100",
            "--processes=4",
        ]
    )
    argv = child_argv(parser, args)
    assert not any("secret" in a or "processes" in a or "worker-id" in a for a in argv)
    again = build_parser().parse_args(["worker", *argv, "--processes=1"])
    for name, value in vars(args).items():
        if name not in PER_CHILD | {"func", "worker_parser"}:
            assert getattr(again, name) == value, name
    assert again.imports == ["m1", "m2"] and again.processes == 1


def test_restart_backoff_doubles_up_to_its_cap() -> None:
    policy = RestartPolicy(first_s=0.5, max_s=4.0)
    assert [policy.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_child_ids_name_the_slot_and_the_restart_and_stay_legal() -> None:
    assert child_id("pod-1-abc", 0, 0) == "pod-1-abc-0"
    assert child_id("pod-1-abc", 1, 3) == "pod-1-abc-1-r3"
    assert len(child_id("x" * 128, 7, 12)) == 128


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def exit_on_sigterm(ready: Path, code: int = 0) -> list[str]:
    """A child that exits ``code`` on SIGTERM; it adds a line to ``ready``
    once its handler is in place."""
    return python(
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: sys.exit({code}))\n"
        f"open({str(ready)!r}, 'a').write('up\\n')\n"
        "time.sleep(60)\n"
    )


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def run_in_thread(supervisor: Supervisor) -> tuple[threading.Thread, list[int]]:
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(supervisor.run()), daemon=True)
    thread.start()
    return thread, result


def test_a_crashing_child_is_restarted_under_new_ids_and_its_tasks_given_back(
    tmp_path: Path,
) -> None:
    returned: list[str] = []
    started: list[str] = []
    ready = tmp_path / "ready"

    def command(index: int, worker_id: str) -> list[str]:
        started.append(worker_id)
        return python("raise SystemExit(3)") if index == 0 else exit_on_sigterm(ready)

    def return_tasks(worker_id: str) -> int:
        returned.append(worker_id)
        return 0

    supervisor = Supervisor(
        processes=2,
        base_id="b",
        command=command,
        return_tasks=return_tasks,
        restart=RestartPolicy(first_s=0.05, max_s=0.2),
    )
    thread, result = run_in_thread(supervisor)
    try:
        wait_until(lambda: len(returned) >= 3 and lines(ready) == 1, timeout=30)
    finally:
        supervisor.request_stop()
        thread.join(30)
    assert not thread.is_alive() and result == [0]
    assert returned[:3] == ["b-0", "b-0-r1", "b-0-r2"]
    assert started.count("b-1") == 1  # the healthy child ran all along
    assert "b-1" not in returned  # it exited 0 when asked: nothing to give back


@pytest.mark.parametrize(("on_sigterm", "expected"), [(0, 0), (1, 1)])
def test_stop_forwards_sigterm_and_exits_zero_only_if_every_child_did(
    tmp_path: Path, on_sigterm: int, expected: int
) -> None:
    ready = tmp_path / "ready"
    supervisor = Supervisor(
        processes=2,
        base_id="b",
        command=lambda index, worker_id: exit_on_sigterm(ready, on_sigterm),
        return_tasks=lambda _: 0,
    )
    thread, result = run_in_thread(supervisor)
    wait_until(lambda: lines(ready) == 2, timeout=30)
    supervisor.request_stop()
    thread.join(30)
    assert not thread.is_alive() and result == [expected]


def restart_delays(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage().rsplit(" ", 1)[1]
        for r in caplog.records
        if r.getMessage().startswith("restarting worker 0 in")
    ]


@pytest.mark.parametrize(
    ("lives_s", "stable_s", "expected"),
    [
        (0.0, 10.0, ["0.1s", "0.2s", "0.4s", "0.4s"]),  # dies at once: doubles, capped
        (0.5, 0.4, ["0.1s", "0.1s", "0.1s", "0.1s"]),  # stayed up 0.5 s >= 0.4 s: resets
    ],
)
def test_backoff_grows_while_a_child_keeps_crashing_and_starts_over_after_it_stayed_up(
    caplog: pytest.LogCaptureFixture, lives_s: float, stable_s: float, expected: list[str]
) -> None:
    caplog.set_level("INFO", logger="taskscale.supervisor")
    supervisor = Supervisor(
        processes=1,
        base_id="b",
        command=lambda index, worker_id: python(f"import time; time.sleep({lives_s}); exit(3)"),
        return_tasks=lambda _: 0,
        restart=RestartPolicy(first_s=0.1, max_s=0.4, stable_s=stable_s),
    )
    thread, _ = run_in_thread(supervisor)
    try:
        wait_until(lambda: len(restart_delays(caplog)) >= 4, timeout=30)
    finally:
        supervisor.request_stop()
        thread.join(30)
    assert restart_delays(caplog)[:4] == expected
