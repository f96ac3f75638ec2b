"""``kvlog summarize``: one table per fleet of each run's KV memory (``kvlog.commands.summarize`` does the work)."""

from __future__ import annotations

import functools
import sys

import click

from kvlog import commands
from kvlog.cli import engine as engine_options
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, message, say
from kvlog.cli.progress import progress_reporter
from kvlog.errors import KvlogError


@click.command(
    epilog=examples(
        "kvlog summarize 'logs/**/*.log'",
        "kvlog summarize logs/ --format csv -o fleet.csv",
        "kvlog summarize /shared/logs/ --engine ray",
    )
)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "csv"]),
    default="text",
    show_default=True,
    help="A table to read, or JSON and CSV (every figure in bytes) for tools.",
)
@click.option(
    "-o", "--output", metavar="FILE", help="Write the table to FILE (whole, or not at all) instead of stdout."
)
@engine_options.source()
@engine_options.year
@engine_options.progress
@engine_options.jobs
@engine_options.engine
@engine_options.ray_address
def summarize(  # noqa: PLR0917 - click passes every option as a parameter
    inputs: tuple[str, ...],
    output_format: str,
    output: str | None,
    source: str | None,
    year: int | None,
    progress: bool | None,
    jobs: int,
    engine: str,
    ray_address: str | None,
) -> None:
    """Summarize every server run and rank in INPUTS (old logs or kvlog events) in one table.

    Per run and rank: the KV address space reserved, the KV memory committed at its peak, the KV pools
    the log printed as allocated that were address-space upper bounds and how much of that was never
    committed (overstated), the weights, the last free device memory, host KV pools, and the memory
    lines no rule read. The totals say how many bytes the logs overstated as memory.

    Exit status: 0 the table was written; 1 the inputs hold no memory event (an empty table is written);
    2 an input could not be read (the others are summarized; none: no table) or the output could not be written;
    128+N when stopped by signal N. The table is the same on every engine (--jobs, --engine ray).
    """
    try:
        outcome = commands.summarize(
            inputs,
            output_format=output_format,
            output=output,
            source=source,
            year=year,
            jobs=jobs,
            engine=engine,
            ray_address=ray_address,
            on_notice=_say,
            progress=functools.partial(progress_reporter, wanted=progress, command="summarize"),
        )
    except KvlogError as exc:
        fail("summarize", message(exc, summarize), commands.exit_status_of(exc))
    if outcome.status_line is not None:
        _say(outcome.status_line)
    sys.exit(outcome.exit_status)


def _say(notice: str) -> None:
    say("summarize", notice)
