"""``kvlog migrate``: old sglang logs (and old kvlog events) to current events, or back to old wording.

The options are parsed here and passed to ``kvlog.commands.migrate``, which does the rest.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

from kvlog import commands
from kvlog.cli import engine as engine_options
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, flags, message, say
from kvlog.cli.progress import progress_reporter
from kvlog.errors import KvlogError


@click.command(
    epilog=examples(
        "kvlog migrate --only-events server.log > server.jsonl",
        "kvlog migrate server.log -o server.migrated.log",
        "kvlog migrate --only-events 'logs/*.log.gz' | kvlog validate -",
        "kvlog migrate --in-place --backup-suffix .orig logs/",
        "kvlog migrate logs/ -o migrated/ --jobs 4 --report report.json --dead-letter unparsed.jsonl --strict",
        "kvlog migrate --format legacy events.jsonl -o sglang-legacy.log",
    )
)
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
    "--validate-all",
    is_flag=True,
    help="Build every event from its line and validate it against its schema (the reference path; slower). "
    "By default an event built from a wording is valid by construction and not checked again; the output is the same.",
)
@click.option(
    "--legacy-generation",
    metavar="ID",
    help="With --format legacy: the old wording to write (e.g. sglang-text/2025-06).",
)
@engine_options.source()
@engine_options.year
@engine_options.usage()
@click.option(
    "-o",
    "--output",
    metavar="OUT",
    help="Output file (or directory, for several inputs; s3://bucket/prefix/ for one object each); - for stdout.",
)
@click.option("--in-place", is_flag=True, help="Replace each input atomically, keeping a backup.")
@click.option("--backup-suffix", default=".orig", show_default=True, help="Suffix of the backup --in-place keeps.")
@click.option("--dry-run", is_flag=True, help="Read and migrate, but write no output (the report is still written).")
@click.option("--report", metavar="FILE", help="Write a JSON report: counts, inferences, unparsed lines.")
@click.option("--dead-letter", metavar="FILE", help="Write each memory-like line left unparsed, with why.")
@click.option("--strict", is_flag=True, help="Exit 1 when any memory-like line was left unparsed.")
@click.option(
    "--allow-unparsed",
    metavar="REGEX",
    multiple=True,
    help="Memory-like lines matching REGEX (Python syntax, searched) may stay unparsed: counted apart, "
    "not dead letters, not failing --strict. Repeatable.",
)
@click.option(
    "--allow-unparsed-from",
    metavar="FILE",
    multiple=True,
    help="Read --allow-unparsed patterns from FILE, one a line (blank lines and lines starting with # skipped).",
)
@engine_options.progress
@engine_options.jobs
@engine_options.engine
@engine_options.ray_address
@engine_options.migrations
def migrate(inputs: tuple[str, ...], progress: bool | None, **options: Any) -> None:
    """Migrate old sglang and vLLM logs and old kvlog events (INPUTS: files, globs, directories, - for stdin).

    Inputs and outputs may be s3://, gs:// or file:// URIs (the fleet extra); a store glob is listed.

    Every line comes out, in order: a recognised memory line as one JSON event (or one line of today's
    or the old wording), every other line byte for byte. .gz and .zst are read and written by suffix.

    Exit status: 0 done; 1 with --strict, some memory-like line was left unparsed or an event could not
    be migrated; 2 an input or output could not be read or written, a file was left as it was for its
    safety (--in-place: a backup already there, the file changed meanwhile), or the options conflict;
    3 the migration files are broken; 128+N when stopped by signal N (130 for Ctrl-C), with every
    temporary file removed.
    """
    try:
        # the options are ``commands.migrate``'s keyword arguments, by name: none is passed by hand
        outcome = commands.migrate(
            inputs,
            progress=functools.partial(progress_reporter, wanted=progress),
            on_notice=_say,
            option_names=flags(migrate),
            **options,
        )
    except KvlogError as exc:
        fail("migrate", message(exc, migrate), commands.exit_status_of(exc))
    except (OSError, ValueError) as exc:  # an I/O failure no step foresaw (the working directory gone)
        fail("migrate", str(exc), commands.EXIT_ERROR)
    _say(outcome.status_line)
    if outcome.strict_failure is not None:
        _say(outcome.strict_failure)
    sys.exit(outcome.exit_status)


def _say(notice: str) -> None:
    say("migrate", notice)
