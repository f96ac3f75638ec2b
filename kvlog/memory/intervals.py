"""The set of committed byte ranges of an arena, kept as sorted, disjoint, non-adjacent runs.

An arena needs three questions answered exactly: which parts of a range are not yet backed (what a
commit must map), which parts are (what a decommit must unmap), and how many bytes are backed in
all. Runs instead of a per-granule bitmap keep a 1 TiB reservation cheap to account.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

Run = tuple[int, int]


class RunSet:
    """Disjoint half-open ``[start, end)`` runs; adjacent runs are merged so each run is maximal."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.total = 0

    def runs(self) -> list[Run]:
        """Every run, in address order."""
        return list(zip(self._starts, self._ends, strict=True))

    def covered(self, start: int, end: int) -> list[Run]:
        """The parts of ``[start, end)`` inside the set, in address order."""
        if start >= end:
            return []
        first = bisect_right(self._ends, start)
        out: list[Run] = []
        for index in range(first, len(self._starts)):
            run_start, run_end = self._starts[index], self._ends[index]
            if run_start >= end:
                break
            out.append((max(run_start, start), min(run_end, end)))
        return out

    def hull(self, start: int, end: int) -> Run | None:
        """From the first to the last byte of the set inside ``[start, end)``; None if there is none."""
        first = bisect_right(self._ends, start)
        last = bisect_left(self._starts, end) - 1
        if first > last:
            return None
        return max(self._starts[first], start), min(self._ends[last], end)

    def gaps(self, start: int, end: int) -> list[Run]:
        """The parts of ``[start, end)`` outside the set, in address order."""
        out: list[Run] = []
        starts, ends = self._starts, self._ends
        index, count, cursor = bisect_right(ends, start), len(starts), start
        while index < count and starts[index] < end:
            if starts[index] > cursor:
                out.append((cursor, starts[index]))
            cursor = ends[index]
            index += 1
        if cursor < end:
            out.append((cursor, end))
        return out

    def add(self, start: int, end: int) -> None:
        """Put ``[start, end)`` in the set, merging it with the runs it overlaps or touches."""
        if start >= end:
            return
        starts, ends = self._starts, self._ends
        first = bisect_left(ends, start)
        last = bisect_right(starts, end)
        if first == last:  # it touches no run: a run of its own
            starts.insert(first, start)
            ends.insert(first, end)
            self.total += end - start
            return
        removed = 0
        for index in range(first, last):
            removed += ends[index] - starts[index]
        start, end = min(start, starts[first]), max(end, ends[last - 1])
        starts[first:last] = (start,)
        ends[first:last] = (end,)
        self.total += end - start - removed

    def remove(self, start: int, end: int) -> None:
        """Take ``[start, end)`` out of the set, splitting the runs it cuts."""
        if start >= end:
            return
        starts, ends = self._starts, self._ends
        first = bisect_right(ends, start)
        last = bisect_left(starts, end)
        if first >= last:
            return
        head, tail = starts[first], ends[last - 1]
        if last == first + 1 and head == start and tail == end:  # exactly one whole run
            del starts[first], ends[first]
            self.total -= end - start
            return
        removed = 0
        for index in range(first, last):
            removed += ends[index] - starts[index]
        kept_starts: list[int] = []
        kept_ends: list[int] = []
        if head < start:  # the first run keeps its head
            kept_starts.append(head)
            kept_ends.append(start)
            removed -= start - head
        if tail > end:  # the last run keeps its tail
            kept_starts.append(end)
            kept_ends.append(tail)
            removed -= tail - end
        starts[first:last] = kept_starts
        ends[first:last] = kept_ends
        self.total -= removed
