"""The ``kvlog`` command: a thin layer of click commands over library functions."""

from __future__ import annotations

import click

from kvlog import __version__
from kvlog.cli.check import check
from kvlog.cli.demo import demo
from kvlog.cli.migrate import migrate
from kvlog.cli.schema import schema
from kvlog.cli.validate import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvlog")
def main() -> None:
    """Truthful KV-cache memory events: validate, migrate and check logs."""


main.add_command(validate)
main.add_command(schema)
main.add_command(demo)
main.add_command(check)
main.add_command(migrate)
