"""An OpenTelemetry export into the SDK's in-memory exporter and reader: what the SDK holds, for a test to read."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from kvlog.otel import OtelExport


def in_memory(**kwargs: Any) -> tuple[OtelExport, InMemoryLogRecordExporter, InMemoryMetricReader]:
    """An export (``OtelExport(..., **kwargs)``), the records it sent, and the reader that collects its metrics."""
    logs, reader = InMemoryLogRecordExporter(), InMemoryMetricReader()
    return OtelExport(logs, reader, **kwargs), logs, reader
