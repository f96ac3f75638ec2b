"""``kvlog schema``: list the catalog and show one schema."""

from __future__ import annotations

import difflib

import click
import orjson

from kvlog.cli.examples import examples
from kvlog.cli.failing import fail
from kvlog.commands import EXIT_ERROR
from kvlog.errors import UnknownEventError
from kvlog.schema.catalog import default_catalog


@click.group(
    epilog=examples(
        "kvlog schema list", "kvlog schema show kv_pool.allocation", "kvlog schema show kv_pool.allocation@1"
    )
)
def schema() -> None:
    """Inspect the event catalog."""


@schema.command("list", epilog=examples("kvlog schema list", "kvlog schema list | grep kv_pool"))
def list_schemas() -> None:
    """Every event with its versions; the current one is marked."""
    catalog = default_catalog()
    for event in catalog.events():
        versions = catalog.versions(event)
        marked = ", ".join(f"v{v}{' (current)' if v == versions[-1] else ''}" for v in versions)
        title = catalog.schema(event, versions[-1]).get("title", "")
        click.echo(f"{event:28} {marked:22} {title}")


@schema.command("show", epilog=examples("kvlog schema show kv_pool.allocation", "kvlog schema show kv_arena.ready@1"))
@click.argument("spec", metavar="EVENT[@VERSION]")
def show(spec: str) -> None:
    """Print the JSON Schema of EVENT (its current version unless @VERSION is given).

    Exit status: 0 printed; 2 no such event or version.
    """
    catalog = default_catalog()
    event, at, version = spec.partition("@")
    try:
        number = int(version.removeprefix("v")) if at else catalog.latest(event)
        document = catalog.schema(event, number)
    except ValueError:
        fail("schema show", f"{spec}: the version must be an integer, not {version!r}", EXIT_ERROR)
    except UnknownEventError as exc:
        close = difflib.get_close_matches(event, catalog.events(), n=1)
        hint = f"; did you mean {close[0]}?" if close and close[0] != event else "; kvlog schema list names them all"
        fail("schema show", f"{exc}{hint}", EXIT_ERROR)
    click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
