"""The options the commands share, declared once (alembic's ``config.py`` is the model).

Where the file commands (``kvlog migrate``, ``validate``, ``summarize``, ``plot``, ``follow``) run, their
progress, the server that wrote their inputs, their worker processes and migration files: a command
takes these from here, so that one flag means one thing, with one help, on every command.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
from click.decorators import FC

from kvlog.commands import ENGINES
from kvlog.text.prefix import SERVERS

engine = click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="local",
    show_default=True,
    help="local: this machine's processes (--jobs); ray: the tasks of a Ray cluster, one file a task "
    "(pip install 'kvlog[fleet]'). The output is the same on both.",
)
ray_address = click.option(
    "--ray-address",
    metavar="ADDR",
    help="With --engine ray: the cluster's HOST:PORT or ray://HOST:PORT [default: the cluster this machine "
    "runs (RAY_ADDRESS, or the last one started here), else a new local cluster].",
)
progress = click.option(
    "--progress/--no-progress",
    default=None,
    help="Show progress on standard error: files and bytes done, over the whole run on any engine [default: a "
    "bar on a terminal for inputs of 64 MiB or more]. Forced on where standard error is not a terminal, a plain "
    "line every few seconds.",
)


_WROTE = "The server that wrote the inputs (default: detected per file from the lines it recognises)."


def source(help_text: str = _WROTE) -> Callable[[FC], FC]:
    """``--source``: the server whose wording the inputs are in, for the commands that read logs."""
    return click.option("--source", type=click.Choice(list(SERVERS)), help=help_text)


year = click.option(
    "--year",
    type=click.IntRange(1, 9999),
    metavar="YYYY",
    help="The year of the lines that print none (vLLM's) [default: bounded by the release that printed them, "
    "else the year the file last changed in].",
)
_USAGE = (
    "Which of the servers' periodic KV cache usage lines (vLLM's GPU KV cache usage: X%, sglang's token usage: "
    "0.xx) become kv_pool.usage events: none (they pass through as they were), sampled (the first of each "
    "rank's, each that moved by 0.05 or more, and one in 100), all."
)


def usage(default: str = "none") -> Callable[[FC], FC]:
    """``--usage``: which periodic usage lines become events, for the commands that read logs."""
    return click.option(
        "--usage", type=click.Choice(["none", "sampled", "all"]), default=default, show_default=True, help=_USAGE
    )


jobs = click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
migrations = click.option(
    "--migrations", type=click.Path(file_okay=False, path_type=Path), help="Use these migration files."
)
_GIB = 1 << 30


def unaccounted_threshold() -> Callable[[FC], FC]:
    """``--unaccounted-threshold GIB``, in bytes to the command: ``kvlog ledger`` and ``plot --view ledger`` alike.

    The ledger is imported here, by the two commands' modules, not by every command's.
    """
    from kvlog.ledger import DEFAULT_UNACCOUNTED_THRESHOLD  # noqa: PLC0415

    return click.option(
        "--unaccounted-threshold",
        metavar="GIB",
        type=click.FloatRange(min=0),
        default=DEFAULT_UNACCOUNTED_THRESHOLD / _GIB,
        show_default=True,
        callback=lambda _context, _option, value: round(value * _GIB),
        help="Flag a run whose unaccounted memory is beyond GIB GiB (either way), past its printed rounding.",
    )
