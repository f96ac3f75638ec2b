"""Memory metrics from kvlog events: a Prometheus endpoint for live engines and for ``kvlog follow``.

``MemorySeries`` and ``METRICS`` (standard library only) own which metrics exist and how events
update them; ``serve`` starts an endpoint fed by the emission pipeline. Names are imported on first
use, so that ``import kvlog.metrics`` never loads ``prometheus_client`` (the ``follow`` extra) until
``serve`` or ``start_endpoint`` is looked up; without the extra that look-up says what to install
(``MetricsExtraMissing``) rather than raise a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlog.lazy import lazy_exports
from kvlog.metrics.errors import MetricsEndpointError, MetricsExtraMissing

if TYPE_CHECKING:
    from kvlog.metrics.device import process_device
    from kvlog.metrics.ledger import LedgerFigures
    from kvlog.metrics.live import serve
    from kvlog.metrics.prometheus import start_endpoint
    from kvlog.metrics.series import METRICS, Device, MemorySeries, Metric


_exported = lazy_exports(
    __name__,
    {
        "METRICS": "kvlog.metrics.series",
        "Device": "kvlog.metrics.series",
        "LedgerFigures": "kvlog.metrics.ledger",
        "process_device": "kvlog.metrics.device",
        "MemorySeries": "kvlog.metrics.series",
        "Metric": "kvlog.metrics.series",
        "serve": "kvlog.metrics.live",
        "start_endpoint": "kvlog.metrics.prometheus",
    },
)


def __getattr__(name: str) -> Any:
    try:
        return _exported(name)
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client" and not (exc.name or "").startswith("prometheus_client."):
            raise
        raise MetricsExtraMissing("Prometheus metrics need prometheus_client: pip install 'kvlog[follow]'") from None


__all__ = [
    "METRICS",
    "Device",
    "LedgerFigures",
    "MemorySeries",
    "Metric",
    "MetricsEndpointError",
    "MetricsExtraMissing",
    "process_device",
    "serve",
    "start_endpoint",
]
