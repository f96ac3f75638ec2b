"""``kvlog follow``: live server logs to current events, with metrics. Parses options for ``kvlog.commands.follow``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from kvlog import commands
from kvlog.cli import engine as engine_options
from kvlog.cli import live
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, flags, say
from kvlog.errors import KvlogError, worded
from kvlog.metrics.bound import DEFAULT_LIMIT


@click.command(
    epilog=examples(
        "kvlog follow server.log",
        "kvlog follow 'logs/*.log' --state follow.state -o events.jsonl --metrics-port 9400",
        "kvlog follow logs/ --new-only --poll 2",
    )
)
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", metavar="FILE", help="Append the events to FILE (default: standard output).")
@click.option(
    "--state",
    metavar="FILE",
    help="Where the follower records how far each file's events are written: a restart loses and repeats none.",
)
@live.hold
@click.option(
    "--new-only",
    is_flag=True,
    help="Write only the events of lines written after the start (earlier lines are still read, for context "
    "and metrics); with --state, the first run's start: files that appeared while stopped are written whole.",
)
@engine_options.source("The server that writes the logs (default: detected per file).")
@engine_options.year
@engine_options.usage()
@click.option(
    "--poll",
    "poll_s",
    type=float,
    metavar="SECONDS",
    help="Poll the files at this interval instead of waiting on inotify (network file systems).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve Prometheus metrics of the followed logs' memory at http://HOST:PORT/metrics (0: any free port).",
)
@live.metrics_host
@click.option(
    "--metrics-label-values",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    metavar="N",
    help="Distinct values each label the log names (pool, arena, event, server) keeps per log; later ones "
    "are folded into one #other series and counted in kvlog_series_folded_total. Also the ranks per log "
    "that have a memory ledger (kvlog_device_memory_bytes ...).",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Export events and metrics over OTLP/HTTP to this collector (e.g. http://127.0.0.1:4318); "
    "needs the otel extra.",
)
@engine_options.migrations
def follow(  # noqa: PLR0917 - click passes every option as a parameter
    paths: tuple[str, ...],
    output: str | None,
    state: str | None,
    hold_s: float,
    new_only: bool,
    source: str | None,
    year: int | None,
    usage: Literal["none", "sampled", "all"],
    poll_s: float | None,
    metrics_port: int | None,
    metrics_host: str,
    metrics_label_values: int,
    otlp_endpoint: str | None,
    migrations: Path | None,
) -> None:
    """Follow live server logs (PATHS: files, directories, quoted globs) and write their events as they come.

    Like tail -F: rotation by rename or copytruncate, truncation, files deleted and recreated and new
    files matching a pattern are followed. Every file is read from its start (its earlier lines give
    the context the later ones need). SIGTERM or Ctrl-C stops it: what is written is flushed and the
    state saved.

    Exit status: 0 stopped by a signal after saving; 2 an output or the state could not be written,
    or the options conflict; 3 the migration files are broken.
    """
    try:
        outcome = commands.follow(
            paths,
            output=output,
            state=state,
            hold_s=hold_s,
            new_only=new_only,
            source=source,
            year=year,
            usage=usage,
            poll_s=poll_s,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            metrics_label_values=metrics_label_values,
            otlp_endpoint=otlp_endpoint,
            migrations=migrations,
            on_notice=_say,
        )
    except KvlogError as exc:
        fail("follow", worded(exc, {**flags(follow), "endpoint": "--otlp-endpoint"}), commands.exit_status_of(exc))
    except (OSError, ValueError) as exc:  # an I/O failure no step foresaw
        fail("follow", str(exc), commands.EXIT_ERROR)
    _say(outcome.status_line)
    sys.exit(outcome.exit_status)


def _say(notice: str) -> None:
    say("follow", notice)
