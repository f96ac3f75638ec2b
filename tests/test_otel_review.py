"""Adversarial review of the OpenTelemetry export: a collector that is down or stuck must not hold kvlog up."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence

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
