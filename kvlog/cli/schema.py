"""``kvlog schema``: list the catalog and show one schema."""

from __future__ import annotations

import click
import orjson

from kvlog.errors import UnknownEventError
from kvlog.schema.catalog import default_catalog


@click.group()
def schema() -> None:
    """Inspect the event catalog."""


@schema.command("list")
def list_schemas() -> None:
    """Every event with its versions; the current one is marked."""
    catalog = default_catalog()
    for event in catalog.events():
        versions = catalog.versions(event)
        marked = ", ".join(f"v{v}{' (current)' if v == versions[-1] else ''}" for v in versions)
        title = catalog.schema(event, versions[-1]).get("title", "")
        click.echo(f"{event:28} {marked:22} {title}")


@schema.command("show")
@click.argument("spec", metavar="EVENT[@VERSION]")
def show(spec: str) -> None:
    """Print the JSON Schema of EVENT (its current version unless @VERSION is given)."""
    catalog = default_catalog()
    event, at, version = spec.partition("@")
    try:
        number = int(version.removeprefix("v")) if at else catalog.latest(event)
        document = catalog.schema(event, number)
    except ValueError:
        raise click.BadParameter(f"version must be an integer, not {version!r}", param_hint="EVENT[@VERSION]") from None
    except UnknownEventError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
