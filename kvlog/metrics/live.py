"""Metrics for an engine that emits kvlog events itself: its own events feed its own endpoint.

Imported only when ``kvlog.metrics.serve`` is first looked up, so ``prometheus_client`` (an extra)
loads then and never for a process that only emits.
"""

from __future__ import annotations

from typing import Any

from kvlog.emission import add_tap, remove_tap
from kvlog.metrics.device import process_device
from kvlog.metrics.ledger import LedgerFigures
from kvlog.metrics.prometheus import Endpoint, start_endpoint
from kvlog.metrics.series import MemorySeries, this_process


def serve(port: int = 9400, host: str = "127.0.0.1", instance: str | None = None) -> Endpoint:
    """Serve this process's events as Prometheus metrics until ``close()`` on the returned endpoint.

    ``instance`` becomes the ``server_instance`` label (default ``hostname:pid``). The endpoint is
    bound before the tap is added, so a taken port raises ``MetricsEndpointError`` with nothing left
    behind. Loopback by default: the endpoint has no authentication.
    """
    series = MemorySeries(ledger=LedgerFigures())
    name = instance if instance is not None else this_process()

    def tap(event: dict[str, Any]) -> None:
        series.observe(event, instance=name)

    series.add_instance(name, device=process_device())  # counters at 0 before anything counts: the first is a rise
    endpoint = start_endpoint(series, host=host, port=port, on_close=lambda: remove_tap(tap))
    add_tap(tap)
    return endpoint


__all__ = ["serve"]
