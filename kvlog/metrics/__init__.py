"""Memory metrics from kvlog events: a Prometheus endpoint for live engines and for ``kvlog follow``.

``MemorySeries`` and ``METRICS`` (standard library only) own which metrics exist and how events
update them; ``serve`` starts an endpoint fed by the emission pipeline. Names are imported on first
use, so that ``import kvlog.metrics`` never loads ``prometheus_client`` (an optional extra) until
``serve`` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlog.lazy import lazy_exports

if TYPE_CHECKING:
    from kvlog.metrics.live import serve
    from kvlog.metrics.series import METRICS, MemorySeries, Metric

__getattr__ = lazy_exports(
    __name__,
    {
        "METRICS": "kvlog.metrics.series",
        "MemorySeries": "kvlog.metrics.series",
        "Metric": "kvlog.metrics.series",
        "serve": "kvlog.metrics.live",
    },
)

__all__ = ["METRICS", "MemorySeries", "Metric", "serve"]
