"""Progress of a long run on standard error: a bar on a terminal, plain lines elsewhere (cron, CI).

One display for the whole run, whichever engine runs it (this process, ``--jobs`` workers, a Ray
cluster): the files done and their bytes on disk, against the totals known at the start
(``kvlog.io.progress`` says how each engine reports them). A run over a few GiB takes minutes;
without a word on a non-terminal, a scheduler's log cannot tell a slow run from a hung one. Forced
on there, a line is written at the start, at most every ``LINE_INTERVAL_S`` seconds, and at the end::

    kvlog migrate: progress 26%, 42/200 files, 1.30 GiB of 5.00 GiB, 80 s
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import click

from kvlog.io.progress import Advance, Shown, ignore, input_size
from kvlog.text.units import BYTES

#: below this much input, no bar unless asked for: the run is over before a bar would say anything
AUTO_MIN_BYTES = 64 << 20
LINE_INTERVAL_S = 10.0
#: what the bar on a terminal says the command is doing
_DOING = {"migrate": "migrating", "validate": "validating", "summarize": "summarizing"}


@contextmanager
def progress_reporter(names: list[str], wanted: bool | None, command: str = "migrate") -> Iterator[Advance]:
    """An ``Advance`` for the run over ``names`` of ``kvlog COMMAND``.

    ``wanted``: True forces progress, False silences it, None decides (a bar on a terminal for
    inputs of ``AUTO_MIN_BYTES`` or more).
    """
    terminal = sys.stderr.isatty()
    if wanted is False or (wanted is None and not terminal):  # nothing shown: no size asked (a store object: a request)
        yield ignore
        return
    sizes = {name: input_size(name) for name in names}
    count = _Count(len(names), sum(sizes[name] for name in names))
    if wanted is None and count.total_bytes < AUTO_MIN_BYTES:
        yield ignore
    elif terminal:
        yield from _bar(count, _DOING.get(command, command), sizes)
    else:
        lines = _Lines(count, command)
        yield Shown(lines.update, sizes)
        lines.say()


class _Count:
    """The files and bytes done of a run, against its totals."""

    def __init__(self, total_files: int, total_bytes: int) -> None:
        self.total_files = total_files
        self.total_bytes = total_bytes
        self.files = 0
        self.bytes = 0

    def add(self, files: int, count: int) -> None:
        self.files += files
        self.bytes += count

    @property
    def share(self) -> float:
        """How much is done, 0 to 1: by bytes, or by files where the inputs have none (standard input)."""
        if self.total_bytes:
            return min(max(self.bytes, 0), self.total_bytes) / self.total_bytes
        return min(self.files, self.total_files) / self.total_files if self.total_files else 1.0

    def __str__(self) -> str:
        return (
            f"{self.files}/{self.total_files} files, "
            f"{BYTES.format(max(self.bytes, 0))} of {BYTES.format(self.total_bytes)}"
        )


def _bar(count: _Count, label: str, sizes: Mapping[str, int]) -> Iterator[Advance]:
    """A click bar over the run's share in thousandths, showing the files and bytes beside it."""

    def shown_beside(_: int | None) -> str:
        return str(count)

    with click.progressbar(length=1000, label=label, file=sys.stderr, item_show_func=shown_beside) as bar:
        shown = 0

        def update(files: int, read: int) -> None:
            nonlocal shown
            count.add(files, read)
            now = int(count.share * 1000)
            bar.update(now - shown)
            if files and now == shown:  # a file done, its bytes told already: the bar shows the count all the same
                bar.render_progress()
            shown = now

        yield Shown(update, sizes)


class _Lines:
    def __init__(self, count: _Count, command: str) -> None:
        self.count = count
        self.command = command
        self.started = time.monotonic()
        self.said = self.started
        self.say()

    def update(self, files: int, read: int) -> None:
        self.count.add(files, read)
        if time.monotonic() - self.said >= LINE_INTERVAL_S:
            self.say()

    def say(self) -> None:
        self.said = time.monotonic()
        click.echo(
            f"kvlog {self.command}: progress {int(self.count.share * 100)}%, {self.count}, "
            f"{self.said - self.started:.0f} s",
            err=True,
        )
