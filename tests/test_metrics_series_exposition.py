"""The series as Prometheus reads them: one family per metric (empty ones declared), its type, unit and help.

Read through OpenMetrics, the format that carries units, with prometheus_client's own parser.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from kvlog.metrics import MetricsEndpointError, prometheus
from kvlog.metrics.prometheus import SeriesCollector, start_endpoint
from kvlog.metrics.series import METRICS, MemorySeries

ALLOCATION = {
    "event": "kv_pool.allocation",
    "ranks": {"tp": 0, "rank": 2},
    "pool": "p",
    "allocation_state": "allocated",
    "kv_bytes": 5,
    "num_tokens": 3,
}


def exposed(series: MemorySeries) -> dict[str, tuple[str, str, str, list[tuple[str, dict[str, str], float]]]]:
    """Each family the collector gives: (type, unit, help, samples), by name."""
    registry = CollectorRegistry()
    registry.register(SeriesCollector(series))
    text = generate_latest(registry).decode()
    return {
        family.name: (
            family.type,
            family.unit,
            family.documentation,
            [(sample.name, sample.labels, sample.value) for sample in family.samples],
        )
        for family in text_string_to_metric_families(text)
    }


def test_every_metric_is_a_family_of_its_type_unit_and_help_even_without_a_series() -> None:
    families = exposed(MemorySeries())
    assert families == {
        metric.name.removesuffix("_total"): (
            metric.kind,
            {"bytes": "bytes", "tokens": "tokens", "ratio": "ratio", "1": ""}[metric.unit],
            metric.help,
            [],
        )
        for metric in METRICS
    }


def test_samples_carry_their_labels_and_counters_their_total() -> None:
    series = MemorySeries()
    series.observe(ALLOCATION, instance="a")
    series.count_unparsed(2, instance="a")
    families = exposed(series)
    labels = {"pool": "p", "tp": "0", "other_ranks": "rank=2"}  # a label with no value is left out
    labels |= {"server": "kvlog", "server_instance": "a"}
    assert families["kvlog_kv_pool_bytes"][3] == [
        ("kvlog_kv_pool_bytes", {"allocation_state": "allocated"} | labels, 5)
    ]
    assert families["kvlog_kv_pool_tokens"][3] == [("kvlog_kv_pool_tokens", labels, 3)]
    assert families["kvlog_events"][3] == [
        ("kvlog_events_total", {"event": "kv_pool.allocation", "server": "kvlog", "server_instance": "a"}, 1)
    ]
    assert families["kvlog_unparsed_lines"][3] == [("kvlog_unparsed_lines_total", {"server_instance": "a"}, 2)]
    assert families["kvlog_schema_violations"][3] == [("kvlog_schema_violations_total", {"server_instance": "a"}, 0)]


def test_an_endpoint_serves_the_series_and_closes_once_with_what_fed_it() -> None:
    closed: list[str] = []
    series = MemorySeries()
    series.observe(ALLOCATION, instance="a")
    endpoint = start_endpoint(series, port=0, on_close=lambda: closed.append("fed no more"))
    try:
        assert endpoint.port > 0
        assert endpoint.url == f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(endpoint.url, timeout=10) as response:
            exposition = response.read()
        assert b'kvlog_kv_pool_tokens{other_ranks="rank=2",pool="p"' in exposition
        assert b'=""' not in exposition
    finally:
        endpoint.close()
    endpoint.close()
    assert closed == ["fed no more"]


def test_an_ipv6_endpoints_address_is_bracketed() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        endpoint = start_endpoint(MemorySeries(), host="::1", port=0)
    except MetricsEndpointError as exc:  # a host without an IPv6 loopback
        pytest.skip(f"no IPv6 loopback: {exc}")
    with endpoint:
        assert endpoint.url == f"http://[::1]:{endpoint.port}/metrics"


def test_an_endpoint_closed_stops_serving_and_leaves_no_thread_behind() -> None:
    """``close()`` returns once the server's thread is gone and its port given back, as the block of ``with`` ends."""
    with start_endpoint(MemorySeries(), port=0) as endpoint:
        urllib.request.urlopen(endpoint.url, timeout=10).close()
    assert not endpoint._thread.is_alive()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(endpoint.url, timeout=5)
    with start_endpoint(MemorySeries(), port=endpoint.port) as again:  # the port is free again
        assert again.port == endpoint.port


def test_an_endpoint_serves_on_the_loopback_at_9400_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default the README names; nothing is bound here (another process may hold 9400)."""
    asked: list[tuple[int, str]] = []

    def refused(port: int, addr: str, registry: CollectorRegistry) -> None:
        asked.append((port, addr))
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(prometheus, "start_http_server", refused)
    with pytest.raises(MetricsEndpointError) as raised:
        start_endpoint(MemorySeries())
    assert str(raised.value) == "cannot serve metrics on 127.0.0.1:9400: Address already in use"
    assert asked == [(9400, "127.0.0.1")]
