"""The TypeScript client (clients/typescript) as the tests run it: ``node``
scripts of its compiled package, and its worker as a process.

``node`` and the package's locked npm dependencies are installed by
scripts/setup.sh (which also builds it and exports the Lua scripts into it
with ``taskscale scripts export``); :func:`built_client` rebuilds the
JavaScript when a source file is newer than it, so an edited client is
what the tests run.  Every process started here is stopped by the test
(SIGKILL at worst); every call has a timeout.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import pytest

from support.workers import REPO, TESTS, process_env

CLIENT = REPO / "clients" / "typescript"
DIST = CLIENT / "dist"
LUA = CLIENT / "lua"
DRIVER = TESTS / "clients" / "node" / "driver.js"
EXAMPLES = DIST / "examples.js"
NODE = shutil.which("node")
#: Why the TypeScript client's tests are skipped (only when node is absent).
NO_NODE = "node is not installed (scripts/setup.sh installs nodejs and npm)"

_logs: dict[int, IO[bytes]] = {}


def _newest(folder: Path, pattern: str) -> float:
    return max((p.stat().st_mtime for p in folder.rglob(pattern)), default=0.0)


def built_client() -> Path:
    """The compiled client, rebuilt with the locked tsc when its sources are
    newer; skips the test when node is absent, fails when setup was not run."""
    if NODE is None:
        pytest.skip(NO_NODE)
    tsc = CLIENT / "node_modules" / "typescript" / "bin" / "tsc"
    if not tsc.exists():
        pytest.fail("clients/typescript/node_modules is missing: run scripts/setup.sh")
    if not (LUA / "manifest.json").exists():
        pytest.fail("clients/typescript/lua is missing: run scripts/setup.sh")
    if _newest(CLIENT / "src", "*.ts") > _newest(DIST, "*.js"):
        subprocess.run([NODE, str(tsc), "-p", str(CLIENT)], check=True, timeout=120, cwd=CLIENT)
    return DIST


def run_node(url: str, op: str, payload: Any = None, *, timeout: float = 60.0) -> Any:
    """One operation of tests/clients/node/driver.js; its value, or the error
    it raised as ``{"ok": False, "name", "message", ...}``."""
    built_client()
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(DRIVER), op, json.dumps(payload or {})],
        env=process_env(url),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise AssertionError(f"node driver {op} exited {done.returncode}: {done.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out["value"] if out["ok"] else out


def worker_command(module: Path, types: str, **flags: object) -> list[str]:
    """``node dist/cli.js --import MODULE --types TYPES --FLAG VALUE ...``."""
    assert NODE is not None
    argv = [NODE, str(DIST / "cli.js"), "--import", str(module), "--types", types]
    for name, value in flags.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def start_ts_worker(
    url: str,
    types: str,
    *,
    module: Path = EXAMPLES,
    env: dict[str, str] | None = None,
    **flags: object,
) -> subprocess.Popen[bytes]:
    """A TypeScript worker process (idle wait 0.5 s, heartbeat 1 s unless
    ``flags`` say otherwise), its output kept for :func:`stop_ts`."""
    built_client()
    flags.setdefault("idle_wait", 0.5)
    flags.setdefault("heartbeat", 1)
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop_ts())
    process = subprocess.Popen(
        worker_command(module, types, **flags),
        env=process_env(url, env),
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    _logs[process.pid] = log
    return process


def ts_output(process: subprocess.Popen[bytes]) -> str:
    log = _logs.get(process.pid)
    if log is None:
        return ""
    log.seek(0)
    return log.read().decode(errors="replace")


def stop_ts(process: subprocess.Popen[bytes], *, timeout: float = 20.0) -> str:
    """SIGTERM, wait, SIGKILL if needed; what it printed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
    text = ts_output(process)
    log = _logs.pop(process.pid, None)
    if log is not None:
        log.close()
    return text


def stop_all(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in procs:
        stop_ts(process)
