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
        first = bisect_left(self._ends, start)
        last = bisect_right(self._starts, end)
        if first < last:
            start = min(start, self._starts[first])
            end = max(end, self._ends[last - 1])
        removed = sum(self._ends[i] - self._starts[i] for i in range(first, last))
        self._starts[first:last] = [start]
        self._ends[first:last] = [end]
        self.total += end - start - removed

    def remove(self, start: int, end: int) -> None:
        """Take ``[start, end)`` out of the set, splitting the runs it cuts."""
        if start >= end:
            return
        first = bisect_right(self._ends, start)
        last = bisect_left(self._starts, end)
        if first >= last:
            return
        keep: list[Run] = []
        if self._starts[first] < start:
            keep.append((self._starts[first], start))
        if self._ends[last - 1] > end:
            keep.append((end, self._ends[last - 1]))
        removed = sum(self._ends[i] - self._starts[i] for i in range(first, last))
        self._starts[first:last] = [run[0] for run in keep]
        self._ends[first:last] = [run[1] for run in keep]
        self.total -= removed - sum(run_end - run_start for run_start, run_end in keep)
