"""How a command speaks on standard error: one line, ``kvlog COMMAND: MESSAGE``, and for a failure its exit status.

Every notice and error of every command goes through ``say``: a file name or a log's text quoted in
it is escaped there (``kvlog.text.printable``), so that no name can end a notice and start a line of
its own (a CI ``::error`` workflow command) or send a terminal escape sequence.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from kvlog.errors import KvlogError, worded
from kvlog.text.printable import LOG_REPORT, Escaping, printable


def flags(command: click.Command) -> dict[str, str]:
    """Each option's keyword argument -> its flag as messages name it (its first declared form: ``-o``)."""
    return {param.name: param.opts[0] for param in command.params if isinstance(param, click.Option) and param.name}


def message(error: KvlogError, command: click.Command) -> str:
    """The error's message, an option named by its flag (``--in-place``) rather than its keyword argument."""
    return worded(error, flags(command))


def say(command: str, text: str, *, escaping: Escaping = LOG_REPORT) -> None:
    """Say ``kvlog COMMAND: TEXT`` on standard error, on one line whatever TEXT quotes."""
    click.echo(f"kvlog {command}: {printable(text, escaping=escaping)}", err=True)


def fail(command: str, text: str, status: int, *, escaping: Escaping = LOG_REPORT) -> NoReturn:
    """Say ``kvlog COMMAND: TEXT`` on standard error and exit with ``status``."""
    say(command, text, escaping=escaping)
    sys.exit(status)
