"""``kvlog migrate``: old sglang logs (and old kvlog events) to current events, or back to old wording."""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import NoReturn

import click
import orjson

from kvlog.cli.progress import progress_reporter
from kvlog.errors import KvlogError
from kvlog.io.inputs import InputError
from kvlog.io.outputs import atomic_output, expand_inputs
from kvlog.migration.engine import MigrateOptions, OutputFormat
from kvlog.migration.plan import PlanError, Request, allowed_unparsed, plan
from kvlog.migration.report import MigrationReport
from kvlog.migration.runner import run_tasks
from kvlog.migration.steps import MigrationError

EXIT_UNPARSED = 1
EXIT_INPUT_ERROR = 2
EXIT_BROKEN_MIGRATIONS = 3


@click.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["jsonl", "text", "legacy"]),
    default="jsonl",
    show_default=True,
    help="jsonl: recognised lines become JSON events; text: today's wording; legacy: the old wording.",
)
@click.option("--to", "to_catalog", type=int, help="Catalog version of the events written (default: the latest).")
@click.option("--only-events", is_flag=True, help="Write only the events, dropping every other line.")
@click.option("--keep-original", is_flag=True, help="Keep each migrated line in migrated.original.")
@click.option(
    "--legacy-generation",
    metavar="ID",
    help="With --format legacy: the old wording to write (e.g. sglang-text/2025-06).",
)
@click.option("-o", "--output", metavar="OUT", help="Output file (or directory, for several inputs); - for stdout.")
@click.option("--in-place", is_flag=True, help="Replace each input atomically, keeping a backup.")
@click.option("--backup-suffix", default=".orig", show_default=True, help="Suffix of the backup --in-place keeps.")
@click.option("--dry-run", is_flag=True, help="Read and migrate, but write no output (the report is still written).")
@click.option(
    "--report", "report_path", metavar="FILE", help="Write a JSON report: counts, inferences, unparsed lines."
)
@click.option("--dead-letter", "dead_path", metavar="FILE", help="Write each memory-like line left unparsed, with why.")
@click.option("--strict", is_flag=True, help="Exit 1 when any memory-like line was left unparsed.")
@click.option(
    "--allow-unparsed",
    "allowed",
    metavar="REGEX",
    multiple=True,
    help="Memory-like lines matching REGEX (Python syntax, searched) may stay unparsed: counted apart, "
    "not dead letters, not failing --strict. Repeatable.",
)
@click.option(
    "--allow-unparsed-from",
    "allowed_from",
    metavar="FILE",
    multiple=True,
    help="Read --allow-unparsed patterns from FILE, one a line (blank lines and lines starting with # skipped).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show progress on standard error [default: a bar on a terminal for inputs of 64 MiB or more]. "
    "Forced on where standard error is not a terminal, a plain line every few seconds.",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option("--migrations", type=click.Path(file_okay=False, path_type=Path), help="Use these migration files.")
def migrate(  # noqa: PLR0917 - click passes every option as a parameter
    inputs: tuple[str, ...],
    output_format: str,
    to_catalog: int | None,
    only_events: bool,
    keep_original: bool,
    legacy_generation: str | None,
    output: str | None,
    in_place: bool,
    backup_suffix: str,
    dry_run: bool,
    report_path: str | None,
    dead_path: str | None,
    strict: bool,
    allowed: tuple[str, ...],
    allowed_from: tuple[str, ...],
    progress: bool | None,
    jobs: int,
    migrations: Path | None,
) -> None:
    """Migrate old sglang logs and old kvlog events (INPUTS: files, globs, directories, - for stdin).

    Every line comes out, in order: a recognised memory line as one JSON event (or one line of today's
    or the old wording), every other line byte for byte. .gz and .zst are read and written by suffix.

    Exit status: 0 done; 1 with --strict, some memory-like line was left unparsed or an event could not
    be migrated; 2 an input or output could not be read or written, a file was left as it was for its
    safety (--in-place: a backup already there, the file changed meanwhile), or the options conflict;
    3 the migration files are broken; 128+N when stopped by signal N (130 for Ctrl-C), with every
    temporary file removed.
    """
    try:
        if to_catalog is not None and output_format != "jsonl":
            raise PlanError("--to chooses the catalog version of JSON events: it needs --format jsonl")
        if legacy_generation is not None and output_format != "legacy":
            raise PlanError("--legacy-generation chooses an old wording: it needs --format legacy")
        options = MigrateOptions(
            output_format=_format(output_format),
            to_catalog=to_catalog,
            only_events=only_events,
            keep_original=keep_original,
            legacy_generation=legacy_generation,
            allowed_unparsed=allowed_unparsed(allowed, allowed_from),
        )
        found = expand_inputs(inputs, (backup_suffix,) if in_place else (), follow_links=not in_place)
        request = Request(found.names, output, in_place, backup_suffix, dry_run, report_path, dead_path)
        tasks = plan(request)
    except (InputError, PlanError) as exc:
        _fail(str(exc), EXIT_INPUT_ERROR)
    for problem in found.problems:
        click.echo(f"kvlog migrate: {problem}", err=True)
    errors = len(found.problems)
    total = MigrationReport()
    notes: Counter[str] = Counter()
    try:
        with ExitStack() as stack:
            dead = stack.enter_context(atomic_output(Path(dead_path))) if dead_path else None
            update = stack.enter_context(progress_reporter(found.names, progress))
            for outcome in run_tasks(
                tasks, options, migrations=migrations, jobs=jobs, dead_letter=dead, progress=update
            ):
                total.merge(outcome.report)
                if outcome.error is not None:
                    errors += 1
                    click.echo(f"kvlog migrate: {outcome.error}", err=True)
                elif outcome.note is not None:
                    notes[outcome.note.partition(",")[0]] += 1
                    if outcome.note.startswith("already current"):
                        click.echo(f"kvlog migrate: {outcome.name}: {outcome.note}", err=True)
    except MigrationError as exc:
        _fail(str(exc), EXIT_BROKEN_MIGRATIONS)
    except (KvlogError, OSError, ValueError) as exc:
        _fail(str(exc), EXIT_INPUT_ERROR)
    if report_path:
        try:
            _write_report(Path(report_path), total)
        except KvlogError as exc:
            _fail(f"cannot write the report: {exc}", EXIT_INPUT_ERROR)
    click.echo(f"kvlog migrate: {total.summary()}{_in_place_summary(notes, found.skipped_links)}", err=True)
    if errors:
        sys.exit(EXIT_INPUT_ERROR)
    if strict and (total.unparsed_memory_lines or total.rejected):
        sys.exit(EXIT_UNPARSED)


def _in_place_summary(notes: Counter[str], skipped_links: list[str]) -> str:
    parts = [f"{count} {what}" for what, count in sorted(notes.items())]
    if skipped_links:
        shown = ", ".join(skipped_links[:3]) + (", ..." if len(skipped_links) > 3 else "")
        parts.append(f"{len(skipped_links)} symbolic link(s) skipped, not replaced ({shown})")
    return f"; {'; '.join(parts)}" if parts else ""


def _format(name: str) -> OutputFormat:
    return "text" if name == "text" else "legacy" if name == "legacy" else "jsonl"


def _write_report(path: Path, report: MigrationReport) -> None:
    with atomic_output(path) as stream:
        stream.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n")


def _fail(message: str, status: int) -> NoReturn:
    click.echo(f"kvlog migrate: {message}", err=True)
    sys.exit(status)
