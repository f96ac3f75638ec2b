"""``migrate``: old sglang logs (and old kvlog events) to current events, or back to an old wording."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import orjson

from kvlog.commands import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from kvlog.commands._deprecated import Renamed
from kvlog.commands._engine import cluster_for
from kvlog.commands._errors import BrokenMigrations
from kvlog.errors import KvlogError, OptionError, worded
from kvlog.io.errors import OutputError
from kvlog.io.expansion import expand_inputs
from kvlog.io.inputs import STDIN
from kvlog.io.outputs import atomic_output
from kvlog.io.progress import Advance, ignore
from kvlog.io.store import targets
from kvlog.migration.batch import Taker, run_tasks
from kvlog.migration.encoders import jsonl
from kvlog.migration.engine import MigrateOptions, Migrator, OutputFormat
from kvlog.migration.errors import MigrationError, UnknownCatalogVersion
from kvlog.migration.plan import Request, allowed_unparsed, plan
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport
from kvlog.migration.sampling import UsageMode
from kvlog.migration.steps import load_chain
from kvlog.text.printable import printable_name

if TYPE_CHECKING:
    from kvlog.io.workers import Engine

#: given the inputs (after expansion), a context that yields the callback taking the files and bytes just done
Progress = Callable[[list[str]], AbstractContextManager[Advance]]
_FORMATS: tuple[OutputFormat, ...] = ("jsonl", "text", "legacy")
#: how many of the lines that failed ``strict`` its message names
_STRICT_SHOWN = 3
_SPELLED_AS_KEYWORDS = {"strict": "strict", "dead_letter": "dead_letter"}


@dataclass(frozen=True)
class MigrateOutcome:
    """What a migration run did."""

    exit_status: int
    #: the counts over every input migrated (what ``report`` was written with)
    report: MigrationReport
    #: each input that could not be expanded or migrated, with the reason, in the order met
    problems: tuple[str, ...] = ()
    #: ``in_place``: how many files ended each way ("already current", ...), where there is more to say
    notes: dict[str, int] = field(default_factory=dict)
    #: ``in_place``: symbolic links met in a directory or through a pattern, left alone
    skipped_links: tuple[str, ...] = ()
    #: how the text of this outcome spells options (``migrate``'s ``option_names``)
    option_names: Mapping[str, str] = field(default_factory=dict)
    #: where the dead letters went (``migrate``'s ``dead_letter``), for ``strict_failure`` to point to
    dead_letter: str | None = None

    #: the 0.1.0 name of ``status_line``
    summary = Renamed("status_line")

    @property
    def status_line(self) -> str:
        """One line: the counts, and what became of the files ``in_place`` did not replace."""
        parts = [f"{count} {what}" for what, count in sorted(self.notes.items())]
        if self.skipped_links:
            shown = ", ".join(self.skipped_links[:3]) + (", ..." if len(self.skipped_links) > 3 else "")
            parts.append(f"{len(self.skipped_links)} symbolic link(s) skipped, not replaced ({shown})")
        return self.report.status_line(self.option_names) + (f"; {'; '.join(parts)}" if parts else "")

    @property
    def strict_failure(self) -> str | None:
        """Why ``strict`` failed the run (None where it did not): the first lines it failed on, and where all are.

        An exit status alone sends whoever reads a CI log looking for the lines; the first few, and the
        file (or the option) that lists every one, end the search.
        """
        if self.exit_status != EXIT_FINDINGS:
            return None
        named = {**_SPELLED_AS_KEYWORDS, **self.option_names}
        count, sample = self.report.unparsed_memory_lines, self.report.unparsed_sample[:_STRICT_SHOWN]
        first = "; ".join(f"{letter['file'] or STDIN}:{letter['line']}: {letter['reason']}" for letter in sample)
        every = (
            f"all {count} are in {self.dead_letter}"
            if self.dead_letter is not None
            else f"{named['dead_letter']} FILE lists all {count}, with why"
        )
        return f"{named['strict']}: {count} line(s) left unparsed or not migrated; the first: {first}; {every}"


def migrate(
    inputs: str | Path | Iterable[str | Path],
    *,
    output: str | Path | None = None,
    output_format: Literal["jsonl", "text", "legacy"] = "jsonl",
    to_catalog: int | None = None,
    only_events: bool = False,
    keep_original: bool = False,
    legacy_generation: str | None = None,
    source: str | None = None,
    year: int | None = None,
    usage: UsageMode = "none",
    validate_all: bool = False,
    in_place: bool = False,
    backup_suffix: str = ".orig",
    dry_run: bool = False,
    report: str | Path | None = None,
    dead_letter: str | Path | None = None,
    strict: bool = False,
    allow_unparsed: Iterable[str] = (),
    allow_unparsed_from: Iterable[str | Path] = (),
    jobs: int = 1,
    engine: str = "local",
    ray_address: str | None = None,
    migrations: str | Path | None = None,
    stdout: IO[bytes] | None = None,
    progress: Progress | None = None,
    on_notice: Callable[[str], None] | None = None,
    option_names: Mapping[str, str] | None = None,
    taker: Taker | None = None,
) -> MigrateOutcome:
    """Migrate ``inputs`` (files, globs, directories, ``-`` for standard input) as ``kvlog migrate`` does.

    Each input's output goes to ``output`` (a file, or a directory for several inputs; ``-`` or None:
    ``stdout``, default the process's standard output), replaces the input (``in_place``, keeping a
    backup named with ``backup_suffix``) or nowhere (``dry_run``). ``report`` and ``dead_letter`` name
    files for the JSON report and the memory-like lines left unparsed. ``on_notice`` is called, as it
    happens, with each thing the run has to say: an input that could not be expanded or migrated, a
    file left as it was. ``progress`` is given the inputs and yields the callback that hears, as the run
    goes, how many more files are done and how many more of their bytes on disk (``kvlog.io.progress``).
    ``source`` names the server that wrote the inputs (``sglang``, ``vllm``; default: detected per file).
    ``year`` is the year of the lines that print none (vLLM's; default: worked out, ``kvlog.migration.dating``).
    ``usage`` says which of the servers' periodic usage lines become ``kv_pool.usage`` events: ``none``
    (they pass through as they were), ``sampled`` or ``all`` (``kvlog.migration.sampling``).
    ``validate_all`` takes the reference path: every event built from its line and validated (the same
    output, slower; ``MigrateOptions.validate_all``).
    ``engine`` runs the files: ``local`` (``jobs`` worker processes of this machine) or ``ray`` (the
    Ray cluster at ``ray_address``, default the one this machine runs, else a new local one; the
    inputs, outputs and ``migrations`` must then be paths every node sees, or store URIs: ``s3://``,
    ``gs://``, see ``kvlog.io.store``); the results are the same.
    ``option_names`` spells the options named in that text and in the status line (the CLI passes its
    flags: ``{"backup_suffix": "--backup-suffix", ...}``); by default they are named by keyword.
    ``taker`` takes each event (a ``kvlog.migration.records.Record``) and each dead letter as the
    engine makes them, instead of their being written (``plot`` and ``summarize`` read ``migrate`` so):
    records do not cross a process boundary, so it needs ``jobs`` 1 and the ``local`` engine.

    Raises ``OptionError`` when the options or paths conflict, ``BrokenMigrations`` when the migration
    files are broken, ``InputError`` for an ``allow_unparsed_from`` file that cannot be read, and
    ``OutputError`` when the dead letters or the report cannot be written; anything else that goes
    wrong with an input is in the outcome. An unforeseen I/O failure is an ``OSError``.
    """
    names = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    if output_format not in _FORMATS:
        raise OptionError("{output_format} {given}: expected one of jsonl, text, legacy", given=repr(output_format))
    options = MigrateOptions(  # which options need which format: MigrateOptions says
        output_format=output_format,
        to_catalog=to_catalog,
        only_events=only_events,
        keep_original=keep_original,
        legacy_generation=legacy_generation,
        source=source,
        year=year,
        usage=usage,
        validate_all=validate_all,
        allowed_unparsed=allowed_unparsed(tuple(allow_unparsed), tuple(map(str, allow_unparsed_from))),
    )
    if jobs < 1:
        raise OptionError("{jobs} {given}: at least one worker is needed", given=jobs)
    if taker is not None and (jobs > 1 or engine != "local"):
        raise OptionError("{taker} takes the records in this process: it needs {jobs} 1 and {engine} local")
    output, report, dead_letter = targets(output, report, dead_letter)  # URIs: see kvlog.io.store
    found = expand_inputs(tuple(map(str, names)), (backup_suffix,) if in_place else (), follow_links=not in_place)
    tasks = plan(Request(found.inputs, _str(output), in_place, backup_suffix, dry_run, _str(report), _str(dead_letter)))
    say = on_notice or (lambda _: None)
    spelling = dict(option_names or {})
    for notice in [*map(str, found.problems), *found.notices()]:
        say(notice)
    directory = Path(migrations) if migrations is not None else None
    migrator = migrator_for(directory, options)
    total = MigrationReport()
    problems = list(map(str, found.problems))
    notes: Counter[str] = Counter()
    with ExitStack() as stack:
        cluster = stack.enter_context(cluster_for(engine, jobs=jobs, ray_address=ray_address, on_notice=say))
        dead = stack.enter_context(atomic_output(dead_letter)) if dead_letter is not None else None
        update = stack.enter_context(progress(found.names) if progress else nullcontext(ignore))
        outcomes = run_tasks(
            tasks,
            migrator,
            migrations=directory,
            engine=cluster or _processes(jobs, len(tasks)),
            dead_letter=dead,
            progress=update,
            stdout=stdout,
            taker=taker,
        )
        try:
            for outcome in outcomes:
                total.merge(outcome.report)
                if outcome.error is not None:
                    problem = worded(outcome.error, spelling)
                    problems.append(problem)
                    say(problem)
                elif outcome.note is not None:
                    notes[outcome.note.partition(",")[0]] += 1
                    if outcome.note.startswith("already current"):
                        say(f"{printable_name(outcome.name)}: {outcome.note}")
        except MigrationError as exc:  # a worker's own load of the chain
            raise BrokenMigrations(str(exc)) from None
    if report is not None:
        _write_report(report, total)
    if problems:
        status = EXIT_ERROR
    elif strict and (total.unparsed_memory_lines or total.rejected):
        status = EXIT_FINDINGS
    else:
        status = EXIT_OK
    return MigrateOutcome(
        status, total, tuple(problems), dict(notes), tuple(found.skipped_links), spelling, _str(dead_letter)
    )


def _processes(jobs: int, files: int) -> Engine | None:
    """``jobs`` worker processes, where more than one would have work; else ``None`` (this process)."""
    if min(jobs, files) <= 1:
        return None
    from kvlog.io.workers import Processes  # noqa: PLC0415 - multiprocessing, for --jobs only

    return Processes(min(jobs, files))


def _str(path: str | Path | None) -> str | None:
    return None if path is None else str(path)


class Collected:
    """A ``Taker`` that keeps the events and the dead letters of a run, in input order (``plot``, ``summarize``).

    It keeps the events ``migrate --only-events`` writes, and no other: one that cannot be written
    (a step nested it deeper than JSON is written) is refused as ``Written`` refuses it, so that the
    engine dead-letters it here as it does in a worker process, whose events come as bytes.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.dead_letters: list[dict[str, Any]] = []

    def passthrough(self, data: bytes | memoryview, /) -> None:
        """Nothing: ``only_events`` drops every line no rule reads."""

    def record(self, record: Record, /) -> None:
        if not record.verbatim:
            jsonl(record)  # raises MigrationError where Written would: the bytes are not kept
        self.events.append(record.event)

    def dead_letter(self, letter: dict[str, Any], /) -> None:
        self.dead_letters.append(letter)


def migrated_events(
    inputs: str | Path | Iterable[str | Path],
    *,
    source: str | None,
    migrations: str | Path | None,
    on_notice: Callable[[str], None] | None,
    keep_original: bool = False,
    year: int | None = None,
    ray_address: str | None = None,
    progress: Progress | None = None,
    usage: UsageMode = "none",
) -> tuple[Collected, MigrateOutcome]:
    """The current events ``migrate`` makes of ``inputs``, and its dead letters, for the commands that read them.

    Old logs and files of kvlog events alike, with the migration's inferences: nothing else parses a
    line. The engine hands the records over in this process: no event is encoded to be decoded again.
    """
    collected = Collected()
    outcome = migrate(
        inputs,
        only_events=True,
        keep_original=keep_original,
        source=source,
        year=year,
        usage=usage,
        migrations=migrations,
        ray_address=ray_address,
        progress=progress,
        on_notice=on_notice,
        taker=collected,
    )
    return collected, outcome


def migrator_for(migrations: Path | None, options: MigrateOptions) -> Migrator:
    """The chain loaded and the options checked against it, once, before anything is opened."""
    try:
        chain = load_chain(migrations)
    except MigrationError as exc:
        raise BrokenMigrations(str(exc)) from None
    try:
        return Migrator(chain, options)
    except UnknownCatalogVersion as exc:  # the engine checks the range; this is how a command words it
        raise OptionError(
            "{to_catalog} {given}: catalog versions are 1..{newest}", given=exc.version, newest=exc.newest
        ) from None
    except ValueError as exc:  # an unknown legacy generation, a source no migration reads
        raise OptionError("{error}", error=exc) from None


def _write_report(path: str, report: MigrationReport) -> None:
    try:
        with atomic_output(path) as stream:
            stream.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
    except KvlogError as exc:
        raise OutputError(f"cannot write the report: {exc}") from None
