"""``kvlog plot``: memory over time as self-contained HTML, PNG or SVG (``kvlog.commands.plot`` does the work)."""

from __future__ import annotations

import sys
from typing import Literal

import click

from kvlog import commands
from kvlog.cli import engine as engine_options
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, message, say
from kvlog.errors import KvlogError
from kvlog.plot.export import VIEWS


@click.command(
    epilog=examples(
        "kvlog plot server.log -o memory.html",
        "kvlog plot logs/ events.jsonl -o memory.svg",
        "kvlog plot 'logs/**/*.log' --view ledger -o ledger.html",
    )
)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    metavar="OUT",
    required=True,
    help="The figure: OUT.html (self-contained, works offline), OUT.png or OUT.svg (rendered with Chromium).",
)
@engine_options.source()
@engine_options.year
@engine_options.usage()
@click.option(
    "--view",
    type=click.Choice(VIEWS),
    default="timeline",
    show_default=True,
    help="timeline: each rank's memory over time, a panel per server run and rank; ledger: kvlog ledger's rows, "
    "a stacked bar per rank (consumers, KV committed, free, unaccounted), a panel per run and DP group, in a grid.",
)
@engine_options.unaccounted_threshold()
@click.option("--title", help="The figure's title.")
def plot(  # noqa: PLR0917 - click passes every option as a parameter
    inputs: tuple[str, ...],
    output: str,
    source: str | None,
    year: int | None,
    usage: Literal["none", "sampled", "all"],
    view: str,
    unaccounted_threshold: int,
    title: str | None,
) -> None:
    """Draw KV-cache memory over time for each server run and rank (INPUTS: old logs or kvlog events).

    INPUTS are files, globs, directories or - (as kvlog migrate takes them). Device memory is stacked:
    weights, the KV memory committed, then the KV pools' address space (hatched, dashed: an upper bound
    that is not memory); free device memory is a line; host KV pools have their own axis. Inferred
    states wear an open diamond: hover over one for the rule, the evidence and its line.

    --view ledger draws kvlog ledger's rows instead: a bar per rank stacking each consumer, the KV memory
    committed, the free memory and the unaccounted rest, the KV address space as a hatched outline beside
    it (never stacked as memory), the device total as a line, flagged ranks under a red triangle.

    Exit status: 0 the figure was written; 1 the inputs hold no memory event (nothing written); 2 an
    input could not be read (the others are still drawn), the output could not be written or rendered,
    or the plot extra is missing; 128+N when stopped by signal N.
    """
    try:
        outcome = commands.plot(
            inputs,
            output=output,
            source=source,
            year=year,
            usage=usage,
            title=title,
            view=view,
            unaccounted_threshold=unaccounted_threshold,
            on_notice=_say,
        )
    except KvlogError as exc:
        fail("plot", message(exc, plot), commands.exit_status_of(exc))
    except (OSError, ValueError) as exc:  # an I/O failure no step foresaw (the working directory gone)
        fail("plot", str(exc), commands.EXIT_ERROR)
    _say(outcome.status_line)
    sys.exit(outcome.exit_status)


def _say(notice: str) -> None:
    say("plot", notice)
