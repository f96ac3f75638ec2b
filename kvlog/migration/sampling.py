"""Which usage lines become events: ``kvlog migrate --usage none|sampled|all``.

A server prints its KV cache's usage on every statistics interval (vLLM every few seconds, sglang every
few dozen decode steps), so a long log holds far more usage lines than memory lines. By default none
is read (the lines pass byte-identical and cost what any request line costs); ``all`` makes each an
event; ``sampled`` keeps what a gauge or a plot needs of them: the first line of each series (one
rank's pool on one device), every line whose usage moved by ``STEP`` or more since the last one kept,
and at least one in ``EVERY`` lines of the series, so that a flat stretch is drawn too. The lines not
kept pass through as they were.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Literal

UsageMode = Literal["none", "sampled", "all"]
USAGE_MODES: tuple[UsageMode, ...] = ("none", "sampled", "all")
#: the event the usage lines become
USAGE_EVENT = "kv_pool.usage"
#: a share of the pool: a series' line is kept when one of its usages moved at least this far
STEP = 0.05
#: a series' line is kept at least once in this many of its lines
EVERY = 100
#: the shares a usage line may say, each compared with the last kept one's
_SHARES = ("fraction", "swa_fraction", "host_fraction")
#: series remembered at once: all forgotten when full (each then starts again with a kept line)
_SERIES = 4096


class UsageSampler:
    """The last kept usage of each series, and how many of its lines passed since."""

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[tuple[float | None, ...], int]] = {}

    def keep(self, series: Hashable, fields: Mapping[str, Any]) -> bool:
        """Whether the line of ``series`` that says ``fields`` becomes an event."""
        shares = tuple(fields.get(name) for name in _SHARES)
        last = self._last.get(series)
        if last is not None and last[1] + 1 < EVERY and not _moved(last[0], shares):
            self._last[series] = (last[0], last[1] + 1)
            return False
        if last is None and len(self._last) >= _SERIES:
            self._last.clear()
        self._last[series] = (shares, 0)
        return True


def _moved(before: tuple[float | None, ...], now: tuple[float | None, ...]) -> bool:
    # the printed shares are rounded (0.01, 0.001): a small margin keeps a step of exactly STEP a step
    return any(
        (a is None) != (b is None) or (a is not None and b is not None and abs(a - b) >= STEP - 1e-9)
        for a, b in zip(before, now, strict=True)
    )
