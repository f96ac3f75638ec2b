"""``kvlog check``: schema, migration and corpus checks for CI (``kvlog.commands.check`` runs them)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import click

from kvlog import commands
from kvlog.check.evolution import MODES
from kvlog.check.rendering import Format, format_report
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, message
from kvlog.cli.stdout import abandon_out, flush_out, write_out
from kvlog.errors import KvlogError
from kvlog.text.printable import CATALOG_REPORT, printable_name


@click.command(
    epilog=examples(
        "kvlog check",
        "kvlog check --against origin/main",
        "kvlog check --against HEAD~1 --mode full --format github",
        "kvlog check --format junit --output kvlog-check.xml",
    )
)
@click.argument("path", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--against",
    "against",
    metavar="GIT_REF",
    help="Compare with the catalog at this git ref (e.g. HEAD~1, origin/main).",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=None,
    help="Compatibility a new version needs with its predecessor(s) unless a migration covers it "
    "[default: [tool.kvlog] compatibility, else backward].",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "github", "junit", "json"]),
    default="text",
    show_default=True,
    help="text: FILE:LINE: RULE level: message; github: workflow annotations; junit: XML; json: the findings.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the report to FILE instead of standard output.",
)
@click.option(
    "--corpus",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Golden logs to replay [default: [tool.kvlog] corpus].",
)
def check(  # noqa: PLR0917 - click passes every option positionally
    path: Path | None,
    against: str | None,
    mode: str | None,
    output_format: str,
    output: Path | None,
    corpus: Path | None,
) -> None:
    """Check an event catalog: schemas, naming, released versions, migrations and golden logs.

    PATH is a directory holding schemas/ (and migrations/), or a project whose pyproject.toml has a
    [tool.kvlog] table; by default the working directory's [tool.kvlog], else kvlog's own catalog.
    Exit status: 0 when no finding is an error, 1 when one is, 2 when the input cannot be checked.
    """
    try:
        outcome = commands.check(path, against=against, mode=mode, corpus=corpus)
    except KvlogError as exc:
        fail("check", message(exc, check), commands.exit_status_of(exc), escaping=CATALOG_REPORT)
    text = format_report(outcome.report, cast(Format, output_format))
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            shown = printable_name(str(output), escaping=CATALOG_REPORT)
            fail("check", f"cannot write {shown}: {exc.strerror}", commands.EXIT_ERROR, escaping=CATALOG_REPORT)
    else:
        try:
            write_out(text)
            flush_out()
        except OSError as exc:  # closed at start, a closed pipe, a full disk
            abandon_out()
            fail(
                "check", f"cannot write the report: {exc.strerror or exc}", commands.EXIT_ERROR, escaping=CATALOG_REPORT
            )
    click.echo(outcome.status_line, err=True)
    sys.exit(outcome.exit_status)
