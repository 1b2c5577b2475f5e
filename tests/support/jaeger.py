"""A real Jaeger (built by scripts/build-jaeger.sh) on loopback ports, in
memory: an OTLP/HTTP receiver to send spans to and the query API to read
the traces back, as an operator's Jaeger would show them."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from support.topologies import free_ports

REPO = Path(__file__).resolve().parents[2]  # tests/support/jaeger.py

CONFIG = """
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
"""


def jaeger_binary() -> Path | None:
    """The cached binary, or None when scripts/build-jaeger.sh has not built it."""
    path = subprocess.run(
        ["bash", str(REPO / "scripts/build-jaeger.sh"), "--print-path"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ok = subprocess.run(["bash", str(REPO / "scripts/build-jaeger.sh"), "--check"], check=False)
    return Path(path) if ok.returncode == 0 else None


class Jaeger:
    """One Jaeger process; ``otlp_url`` takes spans, :meth:`trace` reads one back."""

    def __init__(self, binary: Path) -> None:
        otlp, query, query_grpc = free_ports(3)
        self.otlp_url = f"http://127.0.0.1:{otlp}"
        self.query_url = f"http://127.0.0.1:{query}"
        self._dir = tempfile.TemporaryDirectory(prefix="jaeger-")
        config = Path(self._dir.name) / "config.yaml"
        config.write_text(CONFIG.format(otlp=otlp, query=query, query_grpc=query_grpc))
        self._log = (Path(self._dir.name) / "jaeger.log").open("wb")
        self.process = subprocess.Popen(
            [str(binary), "--config", f"file:{config}"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def __enter__(self) -> Jaeger:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jaeger exited: {self.output()}")
            try:
                self._get("/api/services")
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        raise RuntimeError(f"jaeger did not answer within 30 s: {self.output()}")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._log.close()
        self._dir.cleanup()

    def output(self) -> str:
        self._log.flush()
        return (Path(self._dir.name) / "jaeger.log").read_text(errors="replace")[-3000:]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.query_url + path, timeout=5) as reply:
            return json.loads(reply.read())

    def trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The spans of one trace (Jaeger's JSON: operationName, references,
        tags, and serviceName added from its process); [] if not there yet."""
        try:
            found = self._get(f"/api/traces/{trace_id}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        spans: list[dict[str, Any]] = []
        for one in found.get("data") or []:
            processes = one.get("processes", {})
            for span in one["spans"]:
                span["serviceName"] = processes.get(span["processID"], {}).get("serviceName")
                spans.append(span)
        return spans

    def traces(self, service: str) -> list[list[dict[str, Any]]]:
        """Every trace that has a span of ``service`` (spans as :meth:`trace`)."""
        try:
            found = self._get(f"/api/traces?service={service}&limit=1000&lookback=1h")
        except urllib.error.HTTPError:
            return []
        return [one["spans"] for one in found.get("data") or []]
