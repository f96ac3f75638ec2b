"""``kvlog demo``: the README's first command."""

from __future__ import annotations

import sys

import click

from kvlog.demo import run_demo


@click.command()
@click.option(
    "--format",
    "output",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="console: sglang-style lines for people; json: JSON lines for machines.",
)
def demo(output: str) -> None:
    """Emit kvlog's events through the real, validating pipeline and print them."""
    count = run_demo("json" if output == "json" else "console", sys.stdout)
    click.echo(f"kvlog demo: {count} events emitted, all valid against the catalog", err=True)
