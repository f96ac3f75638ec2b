"""``kvlog migrate``: old sglang logs (and old kvlog events) to current events, or back to old wording."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import click
import orjson

from kvlog.errors import KvlogError
from kvlog.inputs import STDIN, InputError
from kvlog.migration.engine import Options, OutputFormat
from kvlog.migration.files import atomic_output, expand_inputs, same_file
from kvlog.migration.report import Report
from kvlog.migration.runner import Target, Task, run_tasks
from kvlog.migration.steps import MigrationError

EXIT_OK = 0
EXIT_UNPARSED = 1
EXIT_INPUT_ERROR = 2
EXIT_BROKEN_MIGRATIONS = 3
_PROGRESS_MIN_BYTES = 64 << 20


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
    jobs: int,
    migrations: Path | None,
) -> None:
    """Migrate old sglang logs and old kvlog events (INPUTS: files, globs, directories, - for stdin).

    Every line comes out, in order: a recognised memory line as one JSON event (or one line of today's
    or the old wording), every other line byte for byte. .gz and .zst are read and written by suffix.

    Exit status: 0 done; 1 with --strict, some memory-like line was left unparsed or an event could not
    be migrated; 2 an input or output could not be read or written, or the options conflict;
    3 the migration files are broken.
    """
    options = Options(
        output_format=_format(output_format),
        to_catalog=to_catalog,
        only_events=only_events,
        keep_original=keep_original,
        legacy_generation=legacy_generation,
    )
    try:
        if to_catalog is not None and output_format != "jsonl":
            raise click.UsageError("--to chooses the catalog version of JSON events: it needs --format jsonl")
        if legacy_generation is not None and output_format != "legacy":
            raise click.UsageError("--legacy-generation chooses an old wording: it needs --format legacy")
        names = expand_inputs(inputs, (backup_suffix,) if in_place else ())
        tasks = _plan(names, output, in_place, backup_suffix, dry_run)
    except (InputError, click.UsageError) as exc:
        _fail(str(exc), EXIT_INPUT_ERROR)
    total = Report()
    errors = 0
    try:
        with ExitStack() as stack:
            dead = stack.enter_context(_dead_letter(dead_path)) if dead_path else None
            progress = stack.enter_context(_progress(names))
            for outcome in run_tasks(
                tasks, options, migrations=migrations, jobs=jobs, dead_letter=dead, progress=progress
            ):
                total.merge(outcome.report)
                if outcome.error is not None:
                    errors += 1
                    click.echo(f"kvlog migrate: {outcome.error}", err=True)
    except MigrationError as exc:
        _fail(str(exc), EXIT_BROKEN_MIGRATIONS)
    except (KvlogError, OSError, ValueError) as exc:
        _fail(str(exc), EXIT_INPUT_ERROR)
    if report_path:
        try:
            _write_report(Path(report_path), total)
        except OSError as exc:
            _fail(f"{report_path}: cannot write the report: {exc.strerror or exc}", EXIT_INPUT_ERROR)
    click.echo(f"kvlog migrate: {total.summary()}", err=True)
    if errors:
        sys.exit(EXIT_INPUT_ERROR)
    if strict and (total.unparsed_memory_lines or total.rejected):
        sys.exit(EXIT_UNPARSED)


def _format(name: str) -> OutputFormat:
    return "text" if name == "text" else "legacy" if name == "legacy" else "jsonl"


def _plan(names: list[str], output: str | None, in_place: bool, backup_suffix: str, dry_run: bool) -> list[Task]:
    if in_place and output is not None:
        raise click.UsageError("--in-place and -o exclude each other")
    if in_place and STDIN in names:
        raise click.UsageError("--in-place cannot replace standard input")
    if in_place and not backup_suffix:
        raise click.UsageError("--in-place keeps a backup: --backup-suffix must not be empty")
    if in_place:
        for name in names:
            if Path(name).exists() and not Path(name).is_file():
                raise click.UsageError(f"--in-place replaces regular files; {name} is not one (a FIFO or device?)")
    if dry_run:
        return [Task(name, Target("discard")) for name in names]
    if in_place:
        return [Task(name, Target("in_place", backup_suffix=backup_suffix)) for name in names]
    if output is None or output == STDIN:
        return [Task(name, Target("stdout")) for name in names]
    destination = Path(output)
    if len(names) > 1 or destination.is_dir():
        destination.mkdir(parents=True, exist_ok=True)
        paths = [destination / Path(name).name for name in names]
        if len(set(paths)) != len(paths):
            raise click.UsageError(f"-o {output}: two inputs have the same file name")
    else:
        paths = [destination]
    for name, path in zip(names, paths, strict=True):
        if same_file(name, path):
            raise click.UsageError(f"-o {path} is the input {name}: use --in-place to replace it")
    return [Task(name, Target("file", path)) for name, path in zip(names, paths, strict=True)]


@contextmanager
def _dead_letter(path: str) -> Iterator[IO[bytes]]:
    with atomic_output(Path(path)) as stream:
        yield stream


@contextmanager
def _progress(names: list[str]) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal for long runs; nothing otherwise."""
    size = sum(Path(n).stat().st_size for n in names if n != STDIN and Path(n).is_file())
    if not sys.stderr.isatty() or size < _PROGRESS_MIN_BYTES:
        yield lambda _: None
        return
    with click.progressbar(length=size, label="migrating", file=sys.stderr) as bar:
        yield bar.update


def _write_report(path: Path, report: Report) -> None:
    with atomic_output(path) as stream:
        stream.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n")


def _fail(message: str, status: int) -> None:
    click.echo(f"kvlog migrate: {message}", err=True)
    sys.exit(status)
