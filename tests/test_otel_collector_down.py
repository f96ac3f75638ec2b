"""Adversarial review of the OpenTelemetry export: a collector that is down or stuck must not hold kvlog up."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from kvlog.otel import OtelExport, export

EVENT = {
    "event": "weights.load_begin",
    "schema_version": 1,
    "timestamp": "2026-01-01T00:00:00Z",
    "level": "info",
    "avail_bytes": 1,
    "ranks": {"tp": 0},
}


class StuckExporter(LogRecordExporter):
    """A collector that accepts the connection and never answers, until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.entered.set()
        self.release.wait()
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def test_close_gives_up_on_a_stuck_collector_after_its_timeout_and_says_so() -> None:
    exporter = StuckExporter()
    otel = OtelExport(exporter, InMemoryMetricReader())
    try:
        otel.observe(EVENT, instance="x")
        assert otel.close(timeout_s=0.2) is False
        assert otel.close() is True  # closing twice does nothing
    finally:
        exporter.release.set()


def test_close_of_an_export_to_a_collector_that_is_down_returns_within_its_timeout() -> None:
    with socket.socket() as probe:  # a port nothing listens on: connection refused, retried by the SDK
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    otel = export(f"http://127.0.0.1:{port}")
    for _ in range(600):
        otel.observe(EVENT, instance="x")  # queued by the batch processor: observe never waits for the network
    assert otel.close(timeout_s=0.5) is False


def test_close_of_a_reachable_export_completes() -> None:
    otel = OtelExport(StuckExporter(), InMemoryMetricReader())
    assert otel.close() is True  # nothing batched: the shutdown finishes at once


EXITING = """
import sys, threading
from pathlib import Path
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from kvlog.otel import OtelExport

class Exporter(LogRecordExporter):
    def export(self, batch):
        if sys.argv[1] == "stuck":
            threading.Event().wait()  # a collector that never answers, and no shutdown frees it
        with Path(sys.argv[2]).open("a") as out:
            out.writelines(f"{record.log_record.event_name}\\n" for record in batch)
        return LogRecordExportResult.SUCCESS

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30000):
        return True

otel = OtelExport(Exporter(), InMemoryMetricReader())
for name in ("weights.load_begin", "weights.load_end", "kv_pool.allocation"):
    otel.observe({"event": name, "level": "info"}, instance="x")
# never closed: the process exits with the export open
"""


def test_an_export_left_open_is_flushed_at_exit(tmp_path: Path) -> None:
    written = tmp_path / "records"
    done = subprocess.run([sys.executable, "-c", EXITING, "working", str(written)], check=False, timeout=60)
    assert done.returncode == 0
    assert written.read_text().split() == ["weights.load_begin", "weights.load_end", "kv_pool.allocation"]


def test_an_export_left_open_to_a_stuck_collector_lets_the_process_exit(tmp_path: Path) -> None:
    # The SDK's own exit handlers wait 30 s for the stuck export, then more for the metrics; the
    # export's bounded close (5 s) must end the process well before this liveness limit.
    done = subprocess.run([sys.executable, "-c", EXITING, "stuck", str(tmp_path / "records")], check=False, timeout=25)
    assert done.returncode == 0
