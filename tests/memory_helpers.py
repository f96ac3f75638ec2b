"""What the memory tests share: the kernel's own view of an address range, and a validating pipeline."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kvlog.emission import configure
from kvlog.testing import capture_events


def kernel_rss(start: int, end: int) -> int:
    """Resident bytes in ``[start, end)`` read straight from /proc/self/smaps, independently of kvlog.

    Fails if a mapping with resident pages straddles an edge: then the range's Rss is not exact.
    """
    total = 0
    inside = straddles = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low < end and high > start
            straddles = low < start or high > end
        elif inside and line.startswith("Rss:"):
            rss = int(line.split()[1]) * 1024
            assert not (rss and straddles), f"mapping {head} straddles [{start:#x}, {end:#x}) with {rss} B resident"
            total += rss
    return total


def mappings_in(start: int, end: int) -> int:
    """How many mappings of this process overlap ``[start, end)``."""
    count = 0
    for line in Path("/proc/self/maps").read_text().splitlines():
        low, high = (int(part, 16) for part in line.split(" ", 1)[0].split("-"))
        count += low < end and high > start
    return count


@contextmanager
def validated_events() -> Iterator[list[dict[str, Any]]]:
    """Every event emitted in the block, each validated against the catalog (an invalid one raises)."""
    configure(output="json", validation="raise", stream=io.BytesIO())
    with capture_events() as captured:
        yield captured


def last(captured: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The most recent event called ``name``."""
    matching = [event for event in captured if event["event"] == name]
    assert matching, f"no {name} event among {[event['event'] for event in captured]}"
    return matching[-1]
