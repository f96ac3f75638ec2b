"""``kvlog ledger``: per run and rank, where the device memory went (``kvlog.commands.ledger`` does the work)."""

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
        "kvlog ledger server.log",
        "kvlog ledger 'logs/**/*.log' --format csv -o ledger.csv",
        "kvlog ledger logs/ --unaccounted-threshold 0.5 --format json",
        "kvlog ledger /shared/logs/ --engine ray",
    )
)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "csv"]),
    default="text",
    show_default=True,
    help="A block of figures per run and rank to read, or JSON and CSV (every figure in bytes) for tools.",
)
@click.option(
    "-o", "--output", metavar="FILE", help="Write the ledger to FILE (whole, or not at all) instead of stdout."
)
@engine_options.unaccounted_threshold()
@engine_options.source()
@engine_options.year
@engine_options.progress
@engine_options.jobs
@engine_options.engine
@engine_options.ray_address
def ledger(  # noqa: PLR0917 - click passes every option as a parameter
    inputs: tuple[str, ...],
    output_format: str,
    output: str | None,
    unaccounted_threshold: int,
    source: str | None,
    year: int | None,
    progress: bool | None,
    jobs: int,
    engine: str,
    ray_address: str | None,
) -> None:
    """Where the device memory went, per server run and rank in INPUTS (old logs or kvlog events).

    Per run and rank: the device total, what each consumer holds (weights, CUDA graphs, non-torch memory,
    activations, mamba pools), the KV memory committed and, apart, the KV address space reserved (never
    memory), the free memory at the end of start-up, and unaccounted = total - consumers - KV - free.
    Each figure carries what its printed rounding hides (±) and its line; one no line states is unknown,
    never 0. Flags: unaccounted beyond the threshold, a KV upper bound above the device, a budget
    exceeded after CUDA-graph capture, ranks of one run whose figures differ beyond their rounding.

    Exit status: 0 the ledger was written (flags or not); 1 the inputs hold no memory event (an empty
    ledger is written); 2 an input could not be read (the others are read; none: no ledger) or the output
    could not be written; 128+N when stopped by signal N. The ledger is the same on every engine.
    """
    try:
        outcome = commands.ledger(
            inputs,
            output_format=output_format,
            output=output,
            unaccounted_threshold=unaccounted_threshold,
            source=source,
            year=year,
            jobs=jobs,
            engine=engine,
            ray_address=ray_address,
            on_notice=_say,
            progress=functools.partial(progress_reporter, wanted=progress, command="ledger"),
        )
    except KvlogError as exc:
        fail("ledger", message(exc, ledger), commands.exit_status_of(exc))
    if outcome.status_line is not None:
        _say(outcome.status_line)
    sys.exit(outcome.exit_status)


def _say(notice: str) -> None:
    say("ledger", notice)
