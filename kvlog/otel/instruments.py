"""kvlog's memory series as OpenTelemetry metrics: one observable instrument per ``kvlog.metrics`` metric.

``kvlog.metrics.series`` owns which metrics exist and how events move them; this module only reads
``MemorySeries.samples()`` when the SDK collects, so the Prometheus endpoint and OTLP carry the same
figures. Each instrument keeps its metric's name and label names: a collector that turns OTLP into
Prometheus series (adding ``_total`` to counters and a unit suffix such as ``_bytes`` only where the
name lacks it) then gives the very series names kvlog's own endpoint serves, so one dashboard reads
either. Units are UCUM, as OTLP wants them: ``By`` for bytes, ``{token}`` for token slots, ``1`` for a share.

One collection reads one snapshot: the SDK calls every instrument's callback in turn, and a snapshot
is taken again only when a callback finds its own metric already read from the current one. So the
instruments of one export never mix two moments (a pool's bytes from before an event, its tokens from
after), whatever order the SDK calls them in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Final

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from kvlog.metrics.series import METRICS, MemorySeries, Metric

#: ``Metric.unit`` as UCUM (the OTLP convention); a unit not listed is already one ("1")
UCUM: Final = {"bytes": "By", "tokens": "{token}", "ratio": "1"}


class _Snapshots:
    """The samples of one collection, grouped by metric, each metric handed out once per snapshot."""

    def __init__(self, series: MemorySeries) -> None:
        self.series = series
        self.lock = threading.Lock()
        self.points: dict[Metric, list[Observation]] = {}
        self.read: set[Metric] = set(METRICS)  # all read: the first callback takes a snapshot

    def take(self, metric: Metric) -> list[Observation]:
        with self.lock:
            if metric in self.read:
                self.points = {}
                for sampled, labels, value in self.series.samples():
                    self.points.setdefault(sampled, []).append(Observation(_number(value), labels))
                self.read = set()
            self.read.add(metric)
            return self.points.get(metric, [])


def _number(value: float) -> int | float:
    """An integral value (bytes, tokens, counts) as an integer data point, which is what it is."""
    return int(value) if float(value).is_integer() else value


def register(meter: Meter, series: MemorySeries) -> None:
    """Create on ``meter`` one observable instrument per metric, reading ``series``."""
    snapshots = _Snapshots(series)
    for metric in METRICS:
        create = meter.create_observable_counter if metric.kind == "counter" else meter.create_observable_gauge
        create(
            metric.name,
            [_callback(snapshots, metric)],
            unit=UCUM.get(metric.unit, metric.unit),
            description=metric.help,
        )


def _callback(snapshots: _Snapshots, metric: Metric) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        return snapshots.take(metric)

    return observe
