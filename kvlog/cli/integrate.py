"""``kvlog integrate``: the logging configuration that adopts kvlog in sglang or vLLM (``commands.integrate``)."""

from __future__ import annotations

import json
from typing import Any

import click

from kvlog import commands
from kvlog.cli import engine as engine_options
from kvlog.cli import live
from kvlog.cli.examples import examples
from kvlog.cli.failing import fail, message
from kvlog.errors import KvlogError
from kvlog.integrate import LIVE_SERVERS
from kvlog.integrate.budget import MAX_HELD_BYTES
from kvlog.integrate.dictconfig import EVENTS


@click.command(
    epilog=examples(
        "kvlog integrate sglang --events 'kv-{pid}.jsonl' > kvlog-logging.json",
        "kvlog integrate vllm --metrics-port 9400 > kvlog-logging.json",
    )
)
@click.argument("server", type=click.Choice(list(LIVE_SERVERS)))
@click.option(
    "--events",
    default=EVENTS,
    show_default=True,
    metavar="PATH|-",
    help="Each server process's events, as JSON lines: {pid} and {rank} (tp0, dp1-tp1-ep1, main) are filled in "
    "by the process; a relative PATH is made absolute now. -: standard error.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="N",
    help="Serve each process's gauges for Prometheus at port N plus its local rank (LOCAL_RANK, else its TP rank).",
)
@live.metrics_host
@live.hold
@click.option(
    "--max-held",
    "max_held_bytes",
    type=click.IntRange(1),
    default=MAX_HELD_BYTES >> 20,
    show_default=True,
    metavar="MiB",
    callback=lambda _context, _option, mib: mib << 20,
    help="The most each process's handler holds (the records queued, and those read while an event waits for a "
    "later line); records beyond it are dropped and counted, and the look-ahead writes its events as they stand "
    "past half of it.",
)
@engine_options.usage()
@click.option(
    "--nvml",
    is_flag=True,
    default=False,
    help="Sample each process's device memory through NVML at each memory record (the nvml extra, installed where "
    "the server runs): a device_memory.measured event beside each event, and a pool whose line only claims to be "
    "allocated gets its state from the measurement. Without NVML the events are written as without this.",
)
@click.option(
    "--keep",
    metavar="CONFIG.json",
    help="Merge kvlog's handler into this logging configuration instead of the server's default.",
)
def integrate(server: str, **options: Any) -> None:
    """Print a logging configuration that makes a running SERVER (sglang or vllm) emit typed events.

    Save it and name it in the server's variable; nothing else changes:

        kvlog integrate sglang --events 'kv-{pid}.jsonl' > kvlog-logging.json
        SGLANG_LOGGING_CONFIG_PATH=kvlog-logging.json python -m sglang.launch_server ...

    (vLLM: VLLM_LOGGING_CONFIG_PATH.) The server's text output stays as it was: the configuration runs
    the server's own default logging, and adds kvlog's handler beside it.

    Exit status: 0 the configuration was printed; 2 an option cannot work, or the --keep file cannot
    be read or merged into.
    """
    # the options are ``commands.integrate``'s keyword arguments, by name, with its defaults: none is passed by hand
    try:
        document = commands.integrate(server, **options)
    except KvlogError as exc:
        fail("integrate", message(exc, integrate), commands.exit_status_of(exc))
    click.echo(json.dumps(document, indent=2))
