"""Every exception the metrics layer raises, in one module that imports no prometheus_client.

The command layer and the live handler catch them with the ``follow`` extra missing.
"""

from __future__ import annotations

from kvlog.errors import KvlogError


class MetricsExtraMissing(KvlogError):
    """prometheus_client is not installed."""


class MetricsEndpointError(KvlogError):
    """The metrics endpoint cannot listen where it was asked (the port is taken, the address is not local)."""


__all__ = ["MetricsEndpointError", "MetricsExtraMissing"]
