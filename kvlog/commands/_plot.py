"""``plot``: device and host memory over time, per server run and rank, from old logs or kvlog events.

The inputs are read by ``migrate`` (only the events, each with its original line), so an old log and
a file of kvlog events are drawn from the same current events, with the same inferences and
evidence the migration records: nothing here parses a log line, nor the events, which the engine
hands over in this process (``docs/pipeline.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlog.commands import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from kvlog.commands._deprecated import Renamed
from kvlog.commands._migrate import migrated_events
from kvlog.errors import OptionError
from kvlog.ledger import DEFAULT_UNACCOUNTED_THRESHOLD, flagged, ledger_rows
from kvlog.migration.sampling import UsageMode
from kvlog.plot.export import FORMATS, VIEWS, format_of, require_extra, write_figure
from kvlog.plot.timeline import timelines
from kvlog.text.printable import printable_name


@dataclass(frozen=True)
class PlotOutcome:
    """What a plot run did."""

    exit_status: int
    #: the file written (None: nothing was drawn)
    output: Path | None
    #: how many events the inputs held, and how many of a rank's server runs were drawn (a panel each; a bar
    #: each in the ledger view)
    events: int
    runs: int
    #: each input that could not be expanded or read, with the reason, in the order met
    problems: tuple[str, ...] = ()
    #: events left out because the catalog does not validate them (``kvlog validate`` says why)
    invalid: int = 0

    #: the 0.1.0 name of ``status_line``
    summary = Renamed("status_line")

    @property
    def status_line(self) -> str:
        """One line: what was drawn where, or why nothing was."""
        left_out = f"; {self.invalid} invalid event(s) left out (kvlog validate says why)" if self.invalid else ""
        if self.output is None:
            return f"{self.events} event(s) read, none about memory: nothing to plot{left_out}"
        return f"{self.events} event(s), {self.runs} run(s) drawn to {printable_name(str(self.output))}{left_out}"


def plot(
    inputs: str | Path | Iterable[str | Path],
    *,
    output: str | Path,
    source: str | None = None,
    year: int | None = None,
    usage: UsageMode = "none",
    title: str | None = None,
    view: str = "timeline",
    unaccounted_threshold: int = DEFAULT_UNACCOUNTED_THRESHOLD,
    migrations: str | Path | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> PlotOutcome:
    """Draw the memory of every server run and rank in ``inputs`` (as ``migrate`` takes them) to ``output``.

    ``output``'s suffix chooses the format: ``.html`` (self-contained: plotly.js inline, no network),
    ``.png`` or ``.svg`` (rendered by Chrome or Chromium through Kaleido). ``source``, ``year`` and
    ``migrations`` are passed to ``migrate``, and ``usage`` (``sampled``, ``all``: the servers' usage
    lines read, drawn as each run's occupancy panel; ``none``); ``on_notice`` is told of each input that
    could not be read.

    ``view`` chooses the figure: ``timeline``, each rank's memory over time, one panel per server run and
    rank; ``ledger``, ``kvlog ledger``'s rows as one stacked bar per rank (consumers, KV committed, free,
    unaccounted; the KV address space beside it), a panel per run and parallel group, in a grid, flagged
    as ``kvlog ledger`` flags them (``unaccounted_threshold`` bytes).

    The exit status is ``EXIT_OK`` when the figure was written; ``EXIT_FINDINGS`` when the inputs were
    read but hold no memory event to draw (nothing is written); ``EXIT_ERROR`` when an input could not
    be read (the figure of the others is still written). Raises ``OptionError`` for a suffix it does
    not write, a view it does not draw or a negative threshold, ``PlotError`` when the ``plot`` extra
    (or, for an image, a browser) is missing or the render fails, and what ``migrate`` raises.
    """
    target = Path(output)
    fmt = format_of(target)
    if fmt is None:
        raise OptionError(
            "{output} {given}: the suffix chooses the format, one of {suffixes}",
            given=str(target),
            suffixes=", ".join(FORMATS),
        )
    if view not in VIEWS:
        raise OptionError("{view} {given}: one of {views}", given=view, views=", ".join(VIEWS))
    if unaccounted_threshold < 0:
        raise OptionError("{unaccounted_threshold} {given}: a size, 0 or more", given=unaccounted_threshold)
    require_extra(fmt)
    collected, migrated = migrated_events(
        inputs, source=source, year=year, migrations=migrations, on_notice=on_notice, keep_original=True, usage=usage
    )
    events = collected.events
    invalid: list[dict[str, Any]] = []
    runs = timelines(events, invalid.append)
    if view == "ledger":  # a run of usage lines alone states no memory: no bar, as it has no memory panel
        runs = [run for run in runs if run.has_memory]
    failed = EXIT_ERROR if migrated.problems else EXIT_OK
    if not runs:
        return PlotOutcome(failed or EXIT_FINDINGS, None, len(events), 0, migrated.problems, len(invalid))
    if view == "ledger":
        from kvlog.plot.ledger_figure import ledger_figure  # noqa: PLC0415 - Plotly is imported only to draw

        rows = flagged(ledger_rows(runs), unaccounted_threshold)
        figure = ledger_figure(rows) if title is None else ledger_figure(rows, title)
    else:
        from kvlog.plot.figure import memory_figure  # noqa: PLC0415 - Plotly is imported only to draw

        figure = memory_figure(runs) if title is None else memory_figure(runs, title)
    write_figure(figure, target)
    return PlotOutcome(failed, target, len(events), len(runs), migrated.problems, len(invalid))
