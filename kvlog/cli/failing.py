"""How a command says it failed: one line on standard error, ``kvlog COMMAND: MESSAGE``, and its exit status."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from kvlog.errors import KvlogError, worded


def flags(command: click.Command) -> dict[str, str]:
    """Each option's keyword argument -> its flag as messages name it (its first declared form: ``-o``)."""
    return {param.name: param.opts[0] for param in command.params if isinstance(param, click.Option) and param.name}


def message(error: KvlogError, command: click.Command) -> str:
    """The error's message, an option named by its flag (``--in-place``) rather than its keyword argument."""
    return worded(error, flags(command))


def fail(command: str, text: str, status: int) -> NoReturn:
    """Say ``kvlog COMMAND: TEXT`` on standard error and exit with ``status``."""
    click.echo(f"kvlog {command}: {text}", err=True)
    sys.exit(status)
