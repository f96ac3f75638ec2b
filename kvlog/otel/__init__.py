"""OpenTelemetry export of kvlog's events (as log records) and memory series (as metrics), over OTLP/HTTP.

Needs the ``otel`` extra. Importing this package never imports OpenTelemetry: ``export`` and
``OtelExport`` load it on first use, and without the extra say what to install (``OtelExtraMissing``)
rather than raise a bare ``ModuleNotFoundError``. Nothing in kvlog's core imports this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlog.lazy import lazy_exports
from kvlog.otel.errors import OtelExtraMissing

if TYPE_CHECKING:
    from kvlog.otel.exporter import OtelExport, export


_exported = lazy_exports(__name__, dict.fromkeys(("OtelExport", "export"), "kvlog.otel.exporter"))


def __getattr__(name: str) -> Any:
    try:
        return _exported(name)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise OtelExtraMissing("OpenTelemetry export needs the otel extra: pip install 'kvlog[otel]'") from None


__all__ = ["OtelExport", "OtelExtraMissing", "export"]
