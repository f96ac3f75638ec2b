"""``kvlog validate``: check JSON-lines logs against the catalog."""

from __future__ import annotations

import sys

import click

from kvlog.inputs import InputError, read_lines
from kvlog.logcheck import Summary, check_lines
from kvlog.validation import EventValidator

EXIT_INVALID = 1
EXIT_INPUT_ERROR = 2


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--skip-non-json", is_flag=True, help="Skip lines that are not JSON objects (mixed logs) instead of reporting them."
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the summary.")
def validate(files: tuple[str, ...], skip_non_json: bool, quiet: bool) -> None:
    """Validate JSON-lines event logs (FILE... or - for standard input; .gz and .zst too).

    Each problem is printed as FILE:LINE: EVENT@VERSION: JSON-PATH: MESSAGE. Exit status: 0 when
    every line is a valid event, 1 when any is not, 2 when an input cannot be read.
    """
    validator = EventValidator()
    summary = Summary()
    input_errors = 0
    out = sys.stdout
    for name in files:
        try:
            for finding in check_lines(name, read_lines(name), summary, validator, skip_non_json=skip_non_json):
                if not quiet:
                    out.write(f"{finding}\n")
        except InputError as exc:
            input_errors += 1
            click.echo(f"kvlog validate: {exc}", err=True)
    click.echo(
        f"{summary.events} events, {summary.invalid_events} invalid, {summary.non_json_lines} non-JSON lines, "
        f"{summary.skipped_lines} skipped, {summary.findings} problems",
        err=True,
    )
    if input_errors:
        sys.exit(EXIT_INPUT_ERROR)
    if not summary.ok:
        sys.exit(EXIT_INVALID)
