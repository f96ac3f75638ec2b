"""Options the file commands share (``kvlog migrate``, ``validate``, ``summarize``): where they run, progress."""

from __future__ import annotations

import click

from kvlog.commands import ENGINES

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
