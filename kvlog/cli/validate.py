"""``kvlog validate``: check JSON-lines logs against the catalog."""

from __future__ import annotations

import os
import sys

import click

from kvlog.inputs import InputError
from kvlog.logcheck import PARALLEL_MIN_BYTES, Summary, check_input
from kvlog.validation import EventValidator

EXIT_INVALID = 1
EXIT_INPUT_ERROR = 2


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--skip-non-json", is_flag=True, help="Skip lines that are not JSON objects (mixed logs) instead of reporting them."
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the summary.")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help=f"Worker processes per plain file [default: all CPUs for files of {PARALLEL_MIN_BYTES >> 20} MiB or more, "
    "else 1]. Output is the same for every value; standard input and .gz/.zst are read serially.",
)
def validate(files: tuple[str, ...], skip_non_json: bool, quiet: bool, jobs: int | None) -> None:
    """Validate JSON-lines event logs (FILE... or - for standard input; .gz and .zst too).

    Each problem is printed as FILE:LINE: EVENT@VERSION: JSON-PATH: MESSAGE. Exit status: 0 when
    every line is a valid event, 1 when any is not, 2 when an input cannot be read or the findings
    cannot be written.
    """
    validator = EventValidator()
    summary = Summary()
    input_errors = 0
    write = sys.stdout.write
    try:
        for name in files:
            try:
                for finding in check_input(name, summary, validator, skip_non_json=skip_non_json, jobs=jobs):
                    if not quiet:
                        write(f"{finding}\n")
            except InputError as exc:
                input_errors += 1
                sys.stdout.flush()
                click.echo(f"kvlog validate: {exc}", err=True)
        sys.stdout.flush()
    except OSError as exc:  # a full disk or a closed pipe under standard output
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's own flush is quiet
        click.echo(f"kvlog validate: cannot write the findings: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_INPUT_ERROR)
    click.echo(str(summary), err=True)
    if input_errors:
        sys.exit(EXIT_INPUT_ERROR)
    if not summary.ok:
        sys.exit(EXIT_INVALID)
