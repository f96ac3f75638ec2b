"""The ledger's figures as series: ``kvlog ledger``'s own rows, worked out from a rank's run as its events arrive.

One owner of the arithmetic: a run's events go through the timeline and the rows ``kvlog ledger`` prints
(``kvlog.plot.timeline.timelines``, ``kvlog.ledger.ledger_rows``), so a dashboard and the command say the
same of the same events. A figure no line states has no series, never 0: a gauge at 0 would say a model
of no weights. The KV address space reserved is a series of its own, never a consumer of memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvlog.ledger import CONSUMERS, Figure, LedgerRow, ledger_rows
from kvlog.metrics.series import (
    LEDGER_CEILING,
    LEDGER_FREE,
    LEDGER_MEMORY,
    LEDGER_TOTAL,
    LEDGER_UNACCOUNTED,
    LEDGER_UNCERTAINTY,
    LEDGER_VA,
    Metric,
)
from kvlog.plot.timeline import ARENA_BOOKKEEPING, USAGE, timelines
from kvlog.schema.readings import json_integer

#: the consumer label of the KV cache's committed memory, beside the consumers of ``CONSUMERS``
KV_COMMITTED = "kv_committed"
#: the consumer values the series take: bounded by the table, whatever the log says
CONSUMER_LABELS = (*CONSUMERS, KV_COMMITTED)
#: events that say nothing of memory: not kept for the ledger (a server prints its statistics all day)
_UNREAD = (USAGE, "kvlog.schema_violation")


class LedgerFigures:
    """``kvlog.metrics.series.Ledger`` by ``kvlog ledger``'s rows."""

    def __init__(self) -> None:
        timelines([])  # the catalog's validator compiled now, on the caller's thread, not on a scrape's

    def reads(self, event: str) -> bool:
        return event not in _UNREAD

    def supersedes(self, event: Mapping[str, Any], previous: Mapping[str, Any]) -> bool:
        """An arena's commit right after another of the same arena, stating its committed bytes.

        The ledger (and the timeline under it) reads an arena's committed bytes from its last bookkeeping
        event, and none of them measures free memory, so no row rests on the earlier one: a runtime that
        commits all day keeps one event per arena, not one per commit.
        """
        return (
            event.get("event") in ARENA_BOOKKEEPING
            and previous.get("event") in ARENA_BOOKKEEPING
            and event.get("arena_id") == previous.get("arena_id")
            and json_integer(event.get("committed_bytes")) is not None
        )

    def figures(self, events: Sequence[Mapping[str, Any]]) -> list[tuple[Metric, tuple[str, ...], float]]:
        """The last row of the run's events (a run of one rank: one row, unless it restarted) as series."""
        runs = timelines([dict(event) for event in events])
        rows = ledger_rows(runs[-1:])
        return _series(rows[0]) if rows else []


def _series(row: LedgerRow) -> list[tuple[Metric, tuple[str, ...], float]]:
    held = [*row.consumers, (KV_COMMITTED, row.kv_committed)]
    own: list[tuple[Metric, str, Figure]] = [
        (LEDGER_TOTAL, "device_total", row.device_total),
        (LEDGER_FREE, "free", row.free),
        (LEDGER_UNACCOUNTED, "unaccounted", row.unaccounted),
        (LEDGER_CEILING, "ceiling", row.ceiling),
        (LEDGER_VA, "kv_va_upper_bound", row.kv_va_upper_bound),
    ]
    found: list[tuple[Metric, tuple[str, ...], float]] = []
    for name, figure in held:
        if figure.value is not None:
            found.append((LEDGER_MEMORY, (name,), float(figure.value)))
            found.append((LEDGER_UNCERTAINTY, (name,), float(figure.uncertainty)))
    for metric, name, figure in own:
        if figure.value is not None:
            found.append((metric, (), float(figure.value)))
            found.append((LEDGER_UNCERTAINTY, (name,), float(figure.uncertainty)))
    return found


__all__ = ["CONSUMER_LABELS", "KV_COMMITTED", "LedgerFigures"]
