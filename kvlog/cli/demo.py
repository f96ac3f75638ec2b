"""``kvlog demo``: the README's first command."""

from __future__ import annotations

import sys

import click

from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, say
from kvlog.commands import EXIT_ERROR
from kvlog.demo import migration_tour, run_demo


@click.command(epilog=examples("kvlog demo", "kvlog demo --format json | kvlog validate -"))
@click.option(
    "--format",
    "output",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="console: sglang-style lines for people; json: JSON lines for machines (pipe into `kvlog validate -`).",
)
def demo(output: str) -> None:
    """Run the memory runtime (post-capture KV pools, sleep/wake, a host pool) and print its events.

    On the GPU when torch sees one and cuda-bindings is installed, else on this process's memory.
    Every event is validated against the catalog as it is emitted.
    """
    try:
        count = run_demo("json" if output == "json" else "console", sys.stdout)
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        fail("demo", "the demo runs the memory runtime, which needs torch: pip install 'kvlog[torch]'", EXIT_ERROR)
    say("demo", f"{count} events emitted, all valid against the catalog")
    migrated = migration_tour(sys.stderr)
    say("demo", f"{migrated} old sglang lines migrated (kvlog migrate does this to whole logs)")
