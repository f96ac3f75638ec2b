"""Every exception the OpenTelemetry export raises, in one module that imports no OpenTelemetry."""

from __future__ import annotations

from kvlog.errors import KvlogError


class OtelExtraMissing(KvlogError):
    """The OpenTelemetry SDK or its OTLP/HTTP exporter is not installed."""


__all__ = ["OtelExtraMissing"]
