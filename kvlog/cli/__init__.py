"""The ``kvlog`` command: a thin layer of click commands over ``kvlog.commands``.

A command's module is imported when that command runs, not whenever ``kvlog`` starts: ``kvlog
validate`` on a large log should not pay for importing the migration engine, the memory runtime
and the check rules (about 0.1 s a run). Register a command with one line in ``COMMANDS``.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
from typing import Any

import click

from kvlog import __version__
from kvlog.cli.examples import examples
from kvlog.cli.stdout import abandon_out
from kvlog.commands import EXIT_ERROR
from kvlog.io.errors import ReaderGone, Stopped
from kvlog.io.stopping import STOP_SIGNALS, remove_leftovers, stop_if_swallowed, stop_on_signals

#: command name -> "module:attribute" of its click command
COMMANDS = {
    "validate": "kvlog.cli.validate:validate",
    "schema": "kvlog.cli.schema:schema",
    "demo": "kvlog.cli.demo:demo",
    "check": "kvlog.cli.check:check",
    "migrate": "kvlog.cli.migrate:migrate",
    "follow": "kvlog.cli.follow:follow",
    "plot": "kvlog.cli.plot:plot",
    "integrate": "kvlog.cli.integrate:integrate",
    "summarize": "kvlog.cli.summarize:summarize",
    "ledger": "kvlog.cli.ledger:ledger",
}


class _LazyGroup(click.Group):
    """A group that imports each command of ``COMMANDS`` the first time it is asked for.

    It also gives a stopped run the exit status shells expect, 128 + the signal: 130 for Ctrl-C
    (click's own handling says 1, which ``kvlog migrate --strict`` uses for its findings), 143 for
    SIGTERM, 129 for SIGHUP.
    """

    def invoke(self, ctx: click.Context) -> Any:
        stop_on_signals()
        try:
            try:
                return super().invoke(ctx)
            finally:
                stop_if_swallowed()  # a signal whose Stopped a GC callback swallowed still stops the run
        except (ReaderGone, BrokenPipeError):  # standard output's reader is gone (`| head`): quiet, as SIGPIPE is
            remove_leftovers()
            abandon_out()
            with contextlib.suppress(OSError):  # standard error may be that pipe too (`2>&1`)
                sys.stderr.flush()
            ctx.exit(ReaderGone().exit_status)
        except Stopped as stopped:
            remove_leftovers()
            for signum in STOP_SIGNALS:  # a second signal must not cut the exit short
                signal.signal(signum, signal.SIG_IGN)
            click.echo(f"\nkvlog: stopped by {signal.Signals(stopped.signum).name}; temporary files removed", err=True)
            ctx.exit(stopped.exit_status)
        except OSError as exc:  # the last resort: an I/O failure no command foresaw (its working directory gone)
            remove_leftovers()
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"kvlog: {where}{exc.strerror or exc}", err=True)
            ctx.exit(EXIT_ERROR)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, _, attribute = COMMANDS[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)


def _version(ctx: click.Context) -> None:
    """``kvlog --version``: the version, and whether the native core runs (``kvlog.native``), asked only here."""
    from kvlog import native  # noqa: PLC0415 - a plain start does not ask

    click.echo(f"kvlog, version {__version__}\nhot paths: {native.engine()}")
    ctx.exit()


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=examples(
        "kvlog migrate --only-events server.log > server.jsonl",
        "kvlog validate server.jsonl",
        "kvlog follow 'logs/*.log' -o events.jsonl",
        "kvlog COMMAND --help",
    ),
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _, asked: _version(ctx) if asked else None,
    help="Show the version, and which engine runs the hot paths, and exit.",
)
def main() -> None:
    """Truthful KV-cache memory events: validate, migrate and check logs."""
