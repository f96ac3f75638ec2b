"""``kvlog validate``: check JSON-lines logs against the catalog."""

from __future__ import annotations

import io
import sys

import click

from kvlog.cli.stdout import abandon_out, flush_out, write_out
from kvlog.io.inputs import STDIN, InputError
from kvlog.schema.validation import EventValidator
from kvlog.text.printable import printable, printable_name
from kvlog.validate import PARALLEL_MIN_BYTES, Skips, Summary, validate_input

EXIT_INVALID = 1
EXIT_INPUT_ERROR = 2


class _OutputError(Exception):
    """Writing the findings failed: told apart from reading an input, which also raises OSError."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--skip-non-json", is_flag=True, help="Skip lines that are not JSON objects (mixed logs) instead of reporting them."
)
@click.option(
    "--skip-unknown-events",
    is_flag=True,
    help='Skip JSON objects whose "event" is not a catalog event (other loggers\' JSON in a mixed log), '
    "counting them in the summary, instead of reporting them.",
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
def validate(
    files: tuple[str, ...], skip_non_json: bool, skip_unknown_events: bool, quiet: bool, jobs: int | None
) -> None:
    """Validate JSON-lines event logs (FILE... or - for standard input; .gz and .zst too).

    Each problem is printed as FILE:LINE: EVENT@VERSION: JSON-PATH: MESSAGE, with characters that are
    not printable (in file names and in the log) escaped. Exit status: 0 when every line is a valid
    event, 1 when any is not, 2 when an input cannot be read (the other inputs are still validated)
    or the findings cannot be written.
    """
    validator = EventValidator()
    skips = Skips(non_json=skip_non_json, unknown_events=skip_unknown_events)
    summary = Summary()
    input_errors = 0
    if isinstance(sys.stdout, io.TextIOWrapper):  # a finding quoting any text prints, whatever the encoding
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        for name in files:
            try:
                if name == STDIN and sys.stdin is None:  # started with descriptor 0 closed (`<&-`)
                    raise InputError(f"{name}: cannot read: standard input is closed")
                for finding in validate_input(name, summary, validator, skips=skips, jobs=jobs):
                    if not quiet:
                        _write(f"{finding}\n")
            except InputError as exc:  # its message starts with the name, shown here as in a finding
                input_errors += 1
                message = str(exc)
                reason = message[len(name) + 2 :] if message.startswith(f"{name}: ") else message
                _input_error(f"{printable_name(name)}: {printable(reason)}")
            except OSError as exc:  # a read failure no reader named: the file is this input
                input_errors += 1
                _input_error(f"{printable_name(name)}: cannot read: {printable(exc.strerror or str(exc))}")
        _write("")
    except _OutputError as exc:  # a full disk or a closed pipe under standard output
        abandon_out()
        click.echo(f"kvlog validate: cannot write the findings: {exc}", err=True)
        sys.exit(EXIT_INPUT_ERROR)
    click.echo(str(summary), err=True)
    if input_errors:
        sys.exit(EXIT_INPUT_ERROR)
    if not summary.ok:
        sys.exit(EXIT_INVALID)


def _write(text: str) -> None:
    """Write to standard output (flush when ``text`` is empty); an OSError here is an _OutputError."""
    try:
        if text:
            write_out(text)
        else:
            flush_out()
    except OSError as exc:
        raise _OutputError(exc) from None


def _input_error(message: str) -> None:
    _write("")  # the findings of earlier inputs first
    click.echo(f"kvlog validate: {message}", err=True)
