"""``summarize``: one table per fleet, from old logs or kvlog events, of what each run held and what logs overstated.

The inputs are read by ``migrate`` (only the events, and the memory lines no rule read), so an old log
and a file of kvlog events give the same rows, with the same inferences: nothing here parses a line.
In one process (``jobs`` 1, the local engine) the engine hands the events and dead letters over as
it makes them, and memory holds them: nothing is encoded to be decoded again. On the other engines
(``--jobs``, ``--engine ray``) the workers' events cross a process boundary as bytes: ``migrate``
joins them, in input order, into a scratch file read here a group of sources at a time (a file's
events, or a process's across files): runs of different sources share nothing, so the rows of each
group are those of the whole, and memory holds one group at a time. The table is the same, byte for
byte, on every engine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from kvlog.commands import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from kvlog.commands._migrate import MigrateOutcome, Progress, migrate, migrated_events
from kvlog.errors import OptionError
from kvlog.io import jsonline
from kvlog.io.expansion import expand_inputs, file_identity
from kvlog.io.inputs import STDIN
from kvlog.io.outputs import atomic_output, stdout_binary
from kvlog.plot.timeline import Timeline, event_source, timelines
from kvlog.summary import FORMATS, FleetSummary, RunRow, render, summarize_runs


@dataclass(frozen=True)
class SummarizeOutcome:
    """What a summarize run found."""

    exit_status: int
    summary: FleetSummary
    #: events the inputs held
    events: int
    #: each input that could not be expanded or read, with the reason, in the order met
    problems: tuple[str, ...] = ()
    #: events left out of the table because the catalog does not validate them (``kvlog validate`` says why)
    invalid: int = 0

    @property
    def status_line(self) -> str | None:
        """What the table does not show (events left out as invalid); None: the table says it all."""
        return (
            f"{self.invalid} invalid event(s) left out of the table (kvlog validate says why)" if self.invalid else None
        )


def summarize(
    inputs: str | Path | Iterable[str | Path],
    *,
    output_format: str = "text",
    output: str | Path | None = None,
    source: str | None = None,
    year: int | None = None,
    migrations: str | Path | None = None,
    jobs: int = 1,
    engine: str = "local",
    ray_address: str | None = None,
    stdout: IO[bytes] | None = None,
    on_notice: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> SummarizeOutcome:
    """Summarize every server run and rank in ``inputs`` (as ``migrate`` takes them) as ``kvlog summarize`` does.

    The table (``output_format``: ``text``, ``json`` or ``csv``) goes to ``output`` (written whole, or not
    at all) or to ``stdout`` (default the process's standard output). The exit status is ``EXIT_OK``;
    ``EXIT_FINDINGS`` when the inputs hold no memory event (an empty table is still written);
    ``EXIT_ERROR`` when an input could not be read (the others are still summarized; when none could
    be, no table is written). Raises
    ``OptionError`` for a format it does not write, ``OutputError``, and what ``migrate`` raises.
    ``jobs``, ``engine``, ``ray_address`` and ``progress`` run the inputs as ``migrate`` runs them:
    the table is the same, byte for byte, on every engine.
    """
    if output_format not in FORMATS:
        raise OptionError("{output_format} {given}: one of {formats}", given=output_format, formats=", ".join(FORMATS))
    names = table_inputs(inputs, output)
    rows: list[RunRow] = []
    outside = 0

    def take(runs: list[Timeline], letters: list[dict[str, Any]]) -> None:
        nonlocal outside
        part = summarize_runs(runs, letters)
        rows.extend(part.rows)
        outside += part.unparsed_outside_runs

    migrated, count, invalid, unplaced = migrated_runs(
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
    summary = FleetSummary(tuple(rows), outside + unplaced)
    status = table_status(migrated, found=bool(summary.rows))
    if status is not None:
        deliver(render(summary, output_format).encode(), output, stdout)
    return SummarizeOutcome(EXIT_ERROR if status is None else status, summary, count, migrated.problems, invalid)


def table_inputs(inputs: str | Path | Iterable[str | Path], output: str | Path | None) -> tuple[str, ...]:
    """The inputs of a command that writes one table of runs, as names; ``output`` must be none of them."""
    names = tuple(map(str, [inputs] if isinstance(inputs, (str, Path)) else inputs))
    if output is not None and str(output) != "-":
        refuse_an_input(Path(output), names)
    return names


def table_status(migrated: MigrateOutcome, *, found: bool) -> int | None:
    """The exit status of a table of runs (``summarize``, ``ledger``); None: write no table, exit ``EXIT_ERROR``.

    No input read at all writes nothing, as a table of nothing would say all is well; an input that could
    not be read is ``EXIT_ERROR`` (the others are in the table); no run ``found`` is ``EXIT_FINDINGS``.
    """
    if migrated.problems and not migrated.report.files:
        return None
    if migrated.problems:
        return EXIT_ERROR
    return EXIT_OK if found else EXIT_FINDINGS


def migrated_runs(
    names: tuple[str, ...],
    take: Callable[[list[Timeline], list[dict[str, Any]]], None],
    *,
    source: str | None,
    year: int | None,
    migrations: str | Path | None,
    jobs: int,
    engine: str,
    ray_address: str | None,
    progress: Progress | None,
    on_notice: Callable[[str], None] | None,
) -> tuple[MigrateOutcome, int, int, int]:
    """Migrate ``names`` and give ``take`` the timelines of each group of sources, with their files' dead letters.

    The input path of every command that reads runs (``summarize``, ``ledger``): ``migrate`` reads the
    lines, in this process (``jobs`` 1, local: the records are handed over) or through a scratch file of
    the workers' events; either way ``take`` sees the same groups, in input order. Returns ``migrate``'s
    outcome, how many events, how many of them invalid, and how many dead letters were of files without
    an event (before any run of theirs).
    """
    if jobs == 1 and engine == "local":
        collected, migrated = migrated_events(
            names,
            source=source,
            year=year,
            migrations=migrations,
            ray_address=ray_address,
            progress=progress,
            on_notice=on_notice,
        )
        return (migrated, *_grouped(lambda: collected.events, collected.dead_letters, take))
    with tempfile.TemporaryDirectory(prefix="kvlog-runs-") as scratch:
        dead, scratch_events = Path(scratch) / "unparsed.jsonl", Path(scratch) / "events.jsonl"
        with scratch_events.open("wb") as events:
            migrated = migrate(
                names,
                only_events=True,
                source=source,
                year=year,
                migrations=migrations,
                dead_letter=dead,
                jobs=jobs,
                engine=engine,
                ray_address=ray_address,
                stdout=events,
                progress=progress,
                on_notice=on_notice,
            )
        letters = _shipped(dead) if dead.exists() else ()
        return (migrated, *_grouped(lambda: _shipped(scratch_events), letters, take))


def _shipped(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a file ``migrate`` joined from its workers' bytes, one a line, read a line at a time.

    The process boundary: worker processes and Ray tasks ship their events as JSON lines. Each is read
    exactly (``jsonline.exact``: an integer beyond 64 bits keeps its value), as the records the engine
    hands over in one process hold it, so that the table is the same on every engine.
    """
    with path.open("rb") as lines:
        for line in lines:
            if line.strip() and isinstance(event := jsonline.exact(line, orjson.loads(line)), dict):
                yield event


def _grouped(
    events: Callable[[], Iterable[dict[str, Any]]],
    dead_letters: Iterable[dict[str, Any]],
    take: Callable[[list[Timeline], list[dict[str, Any]]], None],
) -> tuple[int, int, int]:
    """Give ``take`` each group's timelines (each ``events()`` a pass over them); how many events, invalid, unplaced.

    A first pass finds where each source's last event is; the second gives ``take`` each shortest
    stretch of events that holds all the events of its sources, with the dead letters of those files:
    runs of different sources share nothing, so the rows of each group are those of the whole, and
    memory holds one group at a time.
    """
    last: dict[str, int] = {}
    count = 0
    for count, event in enumerate(events(), start=1):
        last[event_source(event)] = count
    letters: dict[str, list[dict[str, Any]]] = {}
    for letter in dead_letters:
        letters.setdefault(str(letter.get("file")), []).append(letter)
    invalid: list[dict[str, Any]] = []
    group: list[dict[str, Any]] = []
    sources: set[str] = set()
    end = 0
    for index, event in enumerate(events(), start=1):
        source = event_source(event)
        group.append(event)
        sources.add(source)
        end = max(end, last[source])
        if index == end:
            take(timelines(group, invalid.append), [one for name in sources for one in letters.pop(name, [])])
            group, sources = [], set()
    return count, len(invalid), sum(map(len, letters.values()))  # unplaced: lines of files without an event


def deliver(table: bytes, output: str | Path | None, stdout: IO[bytes] | None) -> None:
    """``table`` written whole to ``output`` (or not at all), or to ``stdout`` (default the standard output)."""
    if output is None or str(output) == "-":
        sink = stdout or stdout_binary()
        sink.write(table)
        sink.flush()
    else:
        with atomic_output(str(output)) as written:  # a str: a URI is an object (kvlog.io.store)
            written.write(table)


def refuse_an_input(output: Path, inputs: tuple[str, ...]) -> None:
    """``kvlog summarize server.log -o server.log`` would replace the log with its table."""
    written = file_identity(str(output))
    for name in expand_inputs(inputs).names:
        if name != STDIN and file_identity(name) == written:
            template = "{output} {path} is the input {input}; it would be overwritten"
            raise OptionError(template, path=str(output), input=name)
