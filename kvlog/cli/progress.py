"""Progress of a long run on standard error: a bar on a terminal, plain lines elsewhere (cron, CI).

A run over a few GiB takes minutes; without a word on a non-terminal, a scheduler's log cannot tell
a slow run from a hung one. Forced on there, a line is written at the start, at most every
``LINE_INTERVAL_S`` seconds, and at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from kvlog.io.inputs import STDIN

#: below this much input, no bar unless asked for: the run is over before a bar would say anything
AUTO_MIN_BYTES = 64 << 20
LINE_INTERVAL_S = 10.0


@contextmanager
def progress_reporter(names: list[str], wanted: bool | None) -> Iterator[Callable[[int], None]]:
    """A callback taking the bytes just read. ``wanted``: True forces progress, False silences it, None decides."""
    total = sum(_size(name) for name in names)
    terminal = sys.stderr.isatty()
    if wanted is False or (wanted is None and (not terminal or total < AUTO_MIN_BYTES)):
        yield lambda _: None
    elif terminal:
        with click.progressbar(length=total, label="migrating", file=sys.stderr) as bar:
            yield bar.update
    else:
        lines = _Lines(total)
        yield lines.update
        lines.say()


class _Lines:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.said = self.started
        self.say()

    def update(self, count: int) -> None:
        self.done += count
        if time.monotonic() - self.said >= LINE_INTERVAL_S:
            self.say()

    def say(self) -> None:
        self.said = time.monotonic()
        share = f"{min(self.done, self.total) * 100 // self.total}%" if self.total else "-"
        click.echo(
            f"kvlog migrate: progress {share}, {_mib(self.done)} of {_mib(self.total)} MiB read, "
            f"{self.said - self.started:.0f} s",
            err=True,
        )


def _mib(count: int) -> str:
    return f"{count / (1 << 20):.1f}"


def _size(name: str) -> int:
    try:
        return 0 if name == STDIN else Path(name).stat().st_size
    except OSError:
        return 0
