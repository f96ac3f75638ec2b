"""The Prometheus side of kvlog's metrics: a collector over a ``MemorySeries`` and the HTTP endpoint.

The collector reads one consistent snapshot per scrape, so a scrape never sees half of an update.
It lives in its own ``CollectorRegistry``: the global one would mix kvlog's series with whatever
else the host process registers, and serving twice in one process would collide on names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kvlog.metrics.errors import MetricsEndpointError
from kvlog.metrics.series import METRICS, MemorySeries


class SeriesCollector(Collector):
    """Exposes every series of a ``MemorySeries`` at scrape time."""

    def __init__(self, series: MemorySeries) -> None:
        self.series = series

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for metric in METRICS:
            family = GaugeMetricFamily if metric.kind == "gauge" else CounterMetricFamily
            unit = "" if metric.unit == "1" else metric.unit
            families[metric.name] = family(metric.name, metric.help, unit=unit)
        for metric, labels, value in self.series.samples():
            exported = families[metric.name]  # labels sample by sample: an empty other_ranks is left out
            exported.add_sample(exported.name + ("_total" if metric.kind == "counter" else ""), labels, value)
        yield from families.values()


@dataclass
class Endpoint:
    """A running metrics endpoint; ``close()`` stops it (and whatever fed it, for ``serve``)."""

    host: str
    port: int
    series: MemorySeries
    _server: WSGIServer
    _thread: Thread
    _on_close: list[Callable[[], None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Where Prometheus scrapes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop feeding and serving; calling it again does nothing."""
        while self._on_close:
            self._on_close.pop()()
        if self._thread.is_alive():
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def start_endpoint(
    series: MemorySeries,
    host: str = "127.0.0.1",
    port: int = 9400,
    *,
    on_close: Callable[[], None] | None = None,
) -> Endpoint:
    """Serve ``series`` at ``http://host:port/metrics`` from a daemon thread; port 0 picks a free port.

    ``on_close`` runs first on ``close()`` (``serve`` removes its emission tap there), so nothing
    feeds a series whose endpoint is gone.
    """
    registry = CollectorRegistry()
    registry.register(SeriesCollector(series))
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise MetricsEndpointError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    return Endpoint(host, server.server_port, series, server, thread, [on_close] if on_close else [])


__all__ = ["Endpoint", "SeriesCollector", "start_endpoint"]
