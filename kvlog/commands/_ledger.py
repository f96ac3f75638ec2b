"""``ledger``: per server run and rank, where the device memory went, from old logs or kvlog events.

The inputs are read as ``summarize`` reads them (``migrated_runs``: ``migrate`` reads every line, on
every engine), so nothing here parses a line, and the table is the same, byte for byte, on every engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kvlog.commands import EXIT_ERROR
from kvlog.commands._migrate import Progress
from kvlog.commands._summarize import deliver, migrated_runs, table_inputs, table_status
from kvlog.errors import OptionError
from kvlog.ledger import DEFAULT_UNACCOUNTED_THRESHOLD, FORMATS, LedgerRow, flagged, ledger_rows, render
from kvlog.plot.timeline import Timeline


@dataclass(frozen=True)
class LedgerOutcome:
    """What a ledger run found."""

    exit_status: int
    rows: tuple[LedgerRow, ...]
    #: events the inputs held
    events: int
    #: each input that could not be expanded or read, with the reason, in the order met
    problems: tuple[str, ...] = ()
    #: events left out because the catalog does not validate them (``kvlog validate`` says why)
    invalid: int = 0

    @property
    def flagged(self) -> int:
        """How many rows hold something an operator must look at."""
        return sum(1 for row in self.rows if row.flags)

    @property
    def status_line(self) -> str | None:
        """What the table does not show at a glance: flagged rows, events left out as invalid."""
        said = []
        if self.flagged:
            said.append(f"{self.flagged} run(s) and rank(s) flagged")
        if self.invalid:
            said.append(f"{self.invalid} invalid event(s) left out of the ledger (kvlog validate says why)")
        return "; ".join(said) or None


def ledger(
    inputs: str | Path | Iterable[str | Path],
    *,
    output_format: str = "text",
    output: str | Path | None = None,
    unaccounted_threshold: int = DEFAULT_UNACCOUNTED_THRESHOLD,
    source: str | None = None,
    year: int | None = None,
    migrations: str | Path | None = None,
    jobs: int = 1,
    engine: str = "local",
    ray_address: str | None = None,
    stdout: IO[bytes] | None = None,
    on_notice: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> LedgerOutcome:
    """The memory ledger of every server run and rank in ``inputs`` (as ``migrate`` takes them), as ``kvlog ledger``.

    The table (``output_format``: ``text``, ``json`` or ``csv``) goes to ``output`` (written whole, or not
    at all) or to ``stdout``. Unaccounted memory beyond ``unaccounted_threshold`` bytes (past its rounding)
    is flagged. The exit status is ``summarize``'s: ``EXIT_OK``; ``EXIT_FINDINGS`` when the inputs hold
    no memory event (an empty table is still written); ``EXIT_ERROR`` when an input could not be read
    (the others are still read; when none could be, no table is written). Raises ``OptionError`` for
    a format it does not write or a negative threshold, ``OutputError``, and what ``migrate`` raises.
    """
    if output_format not in FORMATS:
        raise OptionError("{output_format} {given}: one of {formats}", given=output_format, formats=", ".join(FORMATS))
    if unaccounted_threshold < 0:
        raise OptionError("{unaccounted_threshold} {given}: a size, 0 or more", given=unaccounted_threshold)
    names = table_inputs(inputs, output)
    rows: list[LedgerRow] = []

    def take(runs: list[Timeline], letters: list[dict[str, Any]]) -> None:
        del letters  # a line no rule read states no figure
        rows.extend(flagged(ledger_rows(runs), unaccounted_threshold))

    migrated, count, invalid, _ = migrated_runs(
        names,
        take,
        source=source,
        year=year,
        migrations=migrations,
        jobs=jobs,
        engine=engine,
        ray_address=ray_address,
        progress=progress,
        on_notice=on_notice,
    )
    status = table_status(migrated, found=bool(rows))
    if status is not None:
        deliver(render(rows, output_format, unaccounted_threshold).encode(), output, stdout)
    return LedgerOutcome(EXIT_ERROR if status is None else status, tuple(rows), count, migrated.problems, invalid)
