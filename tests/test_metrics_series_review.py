"""Adversarial review of MemorySeries: inputs a live log or an emission tap can carry that the first tests missed."""

from __future__ import annotations

from kvlog.metrics import MemorySeries


def _gauges(series: MemorySeries, name: str) -> list[tuple[dict[str, str], float]]:
    return [(labels, value) for metric, labels, value in series.samples() if metric.name == name]


def test_an_integer_beyond_a_floats_range_skips_the_update_and_never_raises() -> None:
    series = MemorySeries()
    series.observe({"event": "weights.load_end", "mem_usage_bytes": 10**400, "ranks": {"tp": 0}}, instance="x")
    series.observe({"event": "kv_pool.sleep", "freed_bytes": 10**400}, instance="x")
    series.count_unparsed(10**400, instance="x")
    assert _gauges(series, "kvlog_weights_bytes") == []
    assert _gauges(series, "kvlog_events_total") != []  # the event itself still counts
