"""The rows of a fleet summary: per server run and rank, from the timelines ``kvlog plot`` draws.

An operator who has read that old sglang logs printed address space as memory asks: by how much, on
my fleet? Each row is one rank's server run (``kvlog.plot.timeline``): the address space its KV pools
reserved, the KV memory committed at its peak, the pools the log printed as allocated that were
upper bounds (the migration inferred their state from the arena or post-capture lines), the weights,
the last free device memory measured, and the memory lines no rule read. The totals answer the
question: the bytes printed as KV memory that were never committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvlog.migration.context import rank_key
from kvlog.plot.timeline import Timeline, ranks_label
from kvlog.text.prefix import SERVERS


@dataclass(frozen=True)
class RunRow:
    """One rank's server run."""

    source: str
    ranks: str
    run: int
    #: when the run's first memory event was (RFC 3339)
    start: str
    reserved_va_bytes: int
    committed_kv_bytes: int
    #: KV pools printed as allocated that were address-space upper bounds
    printed_allocated_va_bytes: int
    #: of those, what was never committed: what the log overstated as memory (where a line says what was committed)
    overstated_bytes: int
    #: of those, the pools whose committed memory no line states: up to this much more was overstated
    committed_unknown_bytes: int
    #: what the log overstated at most: ``overstated_bytes`` plus all of ``committed_unknown_bytes``
    overstated_max_bytes: int
    #: the weights' size (None: no line states it, nor the free memory before and after their load)
    weights_bytes: int | None
    #: ``weights_bytes`` is the drop in free memory across the load, no line's ``mem usage=``
    weights_inferred: bool
    #: the last free device memory the run measured (None: it measured none)
    free_bytes: int | None
    host_kv_bytes: int
    unparsed_memory_lines: int


@dataclass(frozen=True)
class FleetSummary:
    """Every run and rank, and the totals over them."""

    rows: tuple[RunRow, ...]
    #: memory-like lines no rule read in files (or ranks) without a run to count them in
    unparsed_outside_runs: int = 0

    def total(self, column: str) -> int:
        """The sum of an integer column over every row (an unknown free memory or weights counts as none).

        Each run counts: a GPU restarted three times is three runs, so a total is over runs, not GPUs.
        The unparsed lines also count those before any run of their ranks.
        """
        extra = self.unparsed_outside_runs if column == "unparsed_memory_lines" else 0
        return extra + sum(getattr(row, column) or 0 for row in self.rows)

    def unknown(self, column: str) -> int:
        """How many rows do not know ``column`` (their total is of the others)."""
        return sum(1 for row in self.rows if getattr(row, column) is None)


def summarize_runs(timelines: Iterable[Timeline], dead_letters: Iterable[Mapping[str, Any]] = ()) -> FleetSummary:
    """Rows from ``timelines`` (``kvlog.plot.timeline.timelines``), each counting the unparsed lines in its range.

    A dead letter (``kvlog migrate``'s record of a memory line no rule read: file, line, text) belongs to
    the run of its file and ranks (read from the line's prefix) that began last at or before its line.
    """
    runs = list(timelines)
    unparsed = _unparsed_by_run(runs, dead_letters)
    rows = tuple(_row(index, timeline, unparsed.get(index, 0)) for index, timeline in enumerate(runs))
    return FleetSummary(rows, unparsed.get(-1, 0))


def _row(index: int, timeline: Timeline, unparsed: int) -> RunRow:
    samples = timeline.samples
    free = [sample.free for sample in samples if sample.free is not None]
    return RunRow(
        source=timeline.source,
        ranks=timeline.ranks,
        run=timeline.run,
        start=samples[0].time.isoformat().replace("+00:00", "Z"),
        reserved_va_bytes=max(sample.kv_reserved for sample in samples),
        committed_kv_bytes=max(sample.kv_committed for sample in samples),
        printed_allocated_va_bytes=timeline.claimed_bytes,
        overstated_bytes=timeline.overstated_bytes,
        committed_unknown_bytes=timeline.claimed_unknown_bytes,
        overstated_max_bytes=timeline.overstated_bytes + timeline.claimed_unknown_bytes,
        weights_bytes=samples[-1].weights,
        weights_inferred=samples[-1].weights_inferred,
        free_bytes=free[-1] if free else None,
        host_kv_bytes=max(sample.host for sample in samples),
        unparsed_memory_lines=unparsed,
    )


def _unparsed_by_run(runs: Sequence[Timeline], dead_letters: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """Unparsed lines per run index (-1: no run of that file and ranks began before the line)."""
    starts: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for index, timeline in enumerate(runs):
        if timeline.first_line is not None:
            starts.setdefault((timeline.source, timeline.ranks), []).append((timeline.first_line, index))
    counts: dict[int, int] = {}
    for letter in dead_letters:
        key = (str(letter.get("file")), _ranks_of(str(letter.get("text", ""))))
        line = letter.get("line")
        before = [index for first, index in starts.get(key, []) if isinstance(line, int) and first <= line]
        run = before[-1] if before else -1
        counts[run] = counts.get(run, 0) + 1
    return counts


def _ranks_of(text: str) -> str:
    """A line's ranks as a timeline names them (``DP0 EP0 TP0``), read by whichever server's prefix has some."""
    for prefix in SERVERS.values():
        ranks = prefix.split(text).ranks
        if ranks:
            return ranks_label(rank_key({"ranks": ranks}))
    return ""
