"""``kvlog validate``: check JSON-lines logs against the catalog (``kvlog.commands.validate`` does the work)."""

from __future__ import annotations

import functools
import io
import sys

import click

from kvlog import commands
from kvlog.cli import engine as engine_options
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, message, say
from kvlog.cli.progress import progress_reporter
from kvlog.cli.stdout import abandon_out, flush_out, write_out
from kvlog.commands import InputFailure
from kvlog.errors import KvlogError
from kvlog.file_validation import PARALLEL_MIN_BYTES, LineProblem


class _OutputError(Exception):
    """Writing the findings failed: told apart from reading an input, which also raises OSError."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))


@click.command(
    epilog=examples(
        "kvlog validate server.jsonl events.jsonl.gz",
        "kvlog migrate --only-events server.log | kvlog validate -",
        "kvlog validate --skip-non-json --skip-unknown-events mixed.log",
        "kvlog validate 's3://events/2026-12/' --engine ray",
    )
)
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
@engine_options.engine
@engine_options.ray_address
@engine_options.progress
def validate(  # noqa: PLR0917 - click passes every option as a parameter
    files: tuple[str, ...],
    skip_non_json: bool,
    skip_unknown_events: bool,
    quiet: bool,
    jobs: int | None,
    engine: str,
    ray_address: str | None,
    progress: bool | None,
) -> None:
    """Validate JSON-lines event logs (FILE...: files, quoted globs, directories, - for stdin; .gz and .zst too).

    A FILE may be an s3://, gs:// or file:// URI (the fleet extra); a store glob ('s3://b/logs/*.jsonl',
    quoted) or prefix ending in / is listed.

    Each problem is printed as FILE:LINE: EVENT@VERSION: JSON-PATH: MESSAGE, with characters that are
    not printable (in file names and in the log) escaped. Exit status: 0 when every line is a valid
    event, 1 when any is not, 2 when an input cannot be read (the other inputs are still validated)
    or the findings cannot be written.
    """
    if isinstance(sys.stdout, io.TextIOWrapper):  # a finding quoting any text prints, whatever the encoding
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        outcome = commands.validate(
            files,
            skip_non_json=skip_non_json,
            skip_unknown_events=skip_unknown_events,
            jobs=jobs,
            engine=engine,
            ray_address=ray_address,
            on_finding=_ignore if quiet else _print,
            on_input_failure=_input_failure,
            on_notice=_say,
            progress=functools.partial(progress_reporter, wanted=progress, command="validate"),
        )
        _write("")
    except _OutputError as exc:  # a full disk or a closed pipe under standard output
        abandon_out()
        fail("validate", f"cannot write the findings: {exc}", commands.EXIT_ERROR)
    except KvlogError as exc:
        fail("validate", message(exc, validate), commands.exit_status_of(exc))
    click.echo(outcome.status_line, err=True)
    sys.exit(outcome.exit_status)


def _print(finding: LineProblem) -> None:
    _write(f"{finding}\n")


def _ignore(_: LineProblem) -> None:
    pass


def _write(text: str) -> None:
    """Write to standard output (flush when ``text`` is empty); an OSError here is an _OutputError."""
    try:
        if text:
            write_out(text)
        else:
            flush_out()
    except OSError as exc:
        raise _OutputError(exc) from None


def _say(notice: str) -> None:
    say("validate", notice)


def _input_failure(failure: InputFailure) -> None:
    _write("")  # the findings of earlier inputs first
    _say(str(failure))
