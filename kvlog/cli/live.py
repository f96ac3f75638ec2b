"""Options the live commands share (``kvlog follow`` and ``kvlog integrate``): one wording, one default."""

from __future__ import annotations

import click

from kvlog.follow.holding import HOLD_S

#: the bounded look-ahead in time of ``kvlog.follow.holding``
hold = click.option(
    "--hold",
    "hold_s",
    type=float,
    default=HOLD_S,
    show_default=True,
    metavar="SECONDS",
    help="How long an event may wait for a later line that tells its state (the post-capture line) before it is "
    "written as it stands, with the look-ahead rule in migrated.inferred.",
)
metrics_host = click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDR",
    help="The address the metrics endpoint listens on (it has no authentication: loopback unless you mean it).",
)
