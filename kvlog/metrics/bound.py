"""A bound on the values a label takes per server_instance, so that log text cannot make series without end.

Pool labels, arena ids, event names and servers come from the log (``{label:words} KV Cache is allocated``):
4,000 distinct labels on one rank were 4,000 series of each pool metric, kept for the run's life and
sent at every scrape. As exporters do with unbounded label values (OpenTelemetry's cardinality limit,
an overflow series), each server_instance keeps the first ``limit`` distinct values of each such label;
updates with a later value go to one series whose value is ``FOLDED`` and are counted
(``kvlog_series_folded_total``), so a dashboard sees that something was folded and how much.

Standard library only, like ``kvlog.metrics.series``.
"""

from __future__ import annotations

from collections.abc import Hashable

#: the value a folded label takes: ``#`` starts only kvlog's own pool names (``#0``), never a server's
FOLDED = "#other"
#: distinct values per label and server_instance: a server prints a handful of pools (target, draft,
#: SWA and Full sub-pools, host and Mamba pools) and the catalog has fewer than 64 events
DEFAULT_LIMIT = 64
#: the labels whose values come from log text: ``pool`` stands for a pool's identity (``pool`` and ``label``),
#: ``server`` is read from the event's ``migrated.source_format``
BOUNDED = ("pool", "arena", "event", "server")


class LabelBound:
    """The distinct values seen per (server_instance, label), at most ``limit`` of each; not thread-safe."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"a label needs room for at least one value, not {limit}")
        self.limit = limit
        self._seen: dict[tuple[str, str], set[Hashable]] = {}

    def admits(self, instance: str, label: str, value: Hashable) -> bool:
        """Whether ``value`` has its own series: it was seen before, or there is still room for it."""
        seen = self._seen.setdefault((instance, label), set())
        if value in seen:
            return True
        if len(seen) >= self.limit:
            return False
        seen.add(value)
        return True


__all__ = ["BOUNDED", "DEFAULT_LIMIT", "FOLDED", "LabelBound"]
