"""The event catalog: every versioned JSON Schema kvlog knows, loaded from schema files.

The schema files are the source of truth; everything else (typed constructors, validators, the
migration chain) is derived from what this module loads. A catalog is a directory laid out as
``<event>/v<N>.json`` plus shared definitions in ``_common.json``; users can load their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from referencing import Registry

    from kvlog.schema.fields import Field

from kvlog.errors import CatalogError, UnknownEventError
from kvlog.schema.readings import json_integer
from kvlog.schema.resources import data_dir

SCHEMA_BASE_URI = "https://kvlog.dev/schemas/"
#: An event version's file name: ``v1.json``, ``v2.json``, ... (no ``v0``, no leading zeros).
_VERSION_FILE = re.compile(r"^v([1-9][0-9]*)\.json$")

Schema = Mapping[str, Any]


def catalog_version(value: object) -> int | None:
    """The catalog version an event's ``schema_version`` value names, or None when it names none.

    JSON Schema compares numbers by value: every version's ``"const": 1`` accepts ``1.0``, so a
    line the schema of version 1 accepts is version 1 however its writer spelt the number, for
    ``validate``, ``migrate`` and ``check`` alike. ``true`` is not a number in JSON (the constant
    refuses it), although Python's ``True == 1`` lets it pass for one in a dict.
    """
    return json_integer(value)


def version_in(file_name: str) -> int | None:
    """The version an event schema's file name gives (``v3.json`` -> 3); None when it is not such a name."""
    match = _VERSION_FILE.match(file_name)
    return int(match.group(1)) if match is not None else None


@dataclass(frozen=True)
class Catalog:
    """Schemas by event name and version, plus the registry that resolves their ``$ref``s."""

    schemas: Mapping[str, Mapping[int, Schema]]
    shared: Mapping[str, Schema] = field(default_factory=dict)
    paths: Mapping[tuple[str, int], Path] = field(default_factory=dict)

    @classmethod
    def load(cls, directories: Iterable[Path]) -> Catalog:
        """Load every schema under ``directories``; a later directory may add events, never replace them."""
        schemas: dict[str, dict[int, Schema]] = {}
        shared: dict[str, Schema] = {}
        paths: dict[tuple[str, int], Path] = {}
        for directory in directories:
            if not directory.is_dir():
                raise CatalogError(f"{directory}: not a catalog directory")
            for path in sorted(directory.glob("_*.json")):
                shared[_read(path)["$id"]] = _read(path)
            for path in sorted(directory.glob("*/v*.json")):
                version = version_in(path.name)
                if version is None:
                    raise CatalogError(f"{path}: schema files are named v<N>.json")
                event = path.parent.name
                if (event, version) in paths:
                    raise CatalogError(f"{path}: {event}@{version} is already defined by {paths[event, version]}")
                schemas.setdefault(event, {})[version] = _read(path)
                paths[event, version] = path
        return cls(schemas=schemas, shared=shared, paths=paths)

    def events(self) -> list[str]:
        """Event names, sorted."""
        return sorted(self.schemas)

    def versions(self, event: str) -> list[int]:
        """Versions of ``event``, ascending."""
        return sorted(self._versions_of(event))

    def latest(self, event: str) -> int:
        """The current version of ``event``."""
        return max(self._versions_of(event))

    def newest_release(self) -> int:
        """The newest catalog release: the highest version of any event."""
        return max(self.latest(event) for event in self.events())

    def at_catalog_version(self, event: str, catalog_version: int) -> int | None:
        """The version of ``event`` in catalog release ``catalog_version``: its newest version not above it."""
        eligible = [v for v in self._versions_of(event) if v <= catalog_version]
        return max(eligible) if eligible else None

    def schema(self, event: str, version: int) -> Schema:
        """The schema of ``event@version``."""
        versions = self._versions_of(event)
        if version not in versions:
            known = ", ".join(str(v) for v in sorted(versions))
            raise UnknownEventError(f"unknown version {version} of event {event!r} (known: {known})")
        return versions[version]

    def fields(self, event: str, version: int) -> Mapping[str, Field]:
        """The fields of ``event@version`` with what their schema says of them, ``$ref``s resolved."""
        self.schema(event, version)  # an unknown event or version says so, not KeyError
        return _fields(self, event, version)

    @property
    def documents(self) -> list[Schema]:
        """Every document a ``$ref`` may point into: shared definitions, then each event version."""
        return [*self.shared.values(), *(s for versions in self.schemas.values() for s in versions.values())]

    @property
    def registry(self) -> Registry[Any]:
        """A registry holding every schema by ``$id``, so relative ``$ref``s resolve offline."""
        return _registry(self)

    def _versions_of(self, event: str) -> Mapping[int, Schema]:
        try:
            return self.schemas[event]
        except KeyError:
            raise UnknownEventError(f"unknown event {event!r}") from None

    def __hash__(self) -> int:
        return id(self)


@cache
def _registry(catalog: Catalog) -> Registry[Any]:
    from referencing import Registry, Resource  # noqa: PLC0415 - only the reference validator needs it
    from referencing.jsonschema import DRAFT202012  # noqa: PLC0415

    resources = [
        (doc["$id"], Resource.from_contents(doc, default_specification=DRAFT202012)) for doc in catalog.documents
    ]
    return Registry().with_resources(resources)


@cache
def _fields(catalog: Catalog, event: str, version: int) -> dict[str, Field]:
    from kvlog.schema.fields import fields, fields_from_json  # noqa: PLC0415 - emitting events reads no schema

    kept = _kept_fields(catalog)
    if kept is not None and f"{event}@{version}" in kept:
        try:
            return fields_from_json(kept[f"{event}@{version}"])
        except (TypeError, ValueError):  # an entry of another shape than fields_to_json writes: read the schema
            pass
    return fields(catalog.schema(event, version), catalog.registry)


@cache
def _kept_fields(catalog: Catalog) -> dict[str, Any] | None:
    """Every event version's fields as JSON data (``"event@version"``), kept across runs; None: none kept.

    Resolving the ``$ref``s of every schema is the same work for the same files each run (and imports
    ``referencing``): the result is kept by ``kvlog.schema.stored``, keyed by every document of the
    catalog, its event names and versions, and the code that reads them (this module, ``fields``,
    ``walk`` and ``referencing``). A catalog one of whose schemas does not resolve is not kept: each
    event's fields are then read when asked, and the broken one says what is wrong, as before.
    """
    from kvlog.schema import fields as reading  # noqa: PLC0415
    from kvlog.schema import stored  # noqa: PLC0415

    key = kept_key(catalog)
    if key is None:
        return None
    kept = stored.load("fields", key)
    if isinstance(kept, dict):
        return kept
    computed: dict[str, Any] = {}
    try:
        for event, versions in catalog.schemas.items():
            for version, schema in versions.items():
                found = reading.fields(schema, catalog.registry)
                computed[f"{event}@{version}"] = data = reading.fields_to_json(found)
                if reading.fields_from_json(data) != found:
                    return None  # would not read back the same: not kept
    except Exception:  # noqa: BLE001 - any schema that cannot be read says so when its fields are asked for
        return None
    stored.store("fields", key, computed)
    return computed


def kept_key(catalog: Catalog) -> str | None:
    """The key of what ``kvlog.schema.stored`` keeps derived from ``catalog``: its documents, and the code reading them.

    Every document of the catalog, its event names and versions, and the code that reads their fields
    (this module, ``fields``, ``walk`` and ``referencing``); None where nothing is kept, or a source
    cannot be read or a document written.
    """
    from kvlog.schema import stored  # noqa: PLC0415

    return None if stored.directory() is None else _digest(catalog)


@cache
def _digest(catalog: Catalog) -> str | None:
    """``kept_key`` worked out once a catalog (a run asks it for the fields and for the migration chain)."""
    from kvlog.schema import fields as reading  # noqa: PLC0415
    from kvlog.schema import stored, walk  # noqa: PLC0415

    documents = [list(catalog.shared.values()), [[e, v, s] for e, vs in catalog.schemas.items() for v, s in vs.items()]]
    try:
        code = stored.sources([__file__, reading.__file__, walk.__file__, *_referencing_sources()])
        return stored.digest([*code, orjson.dumps(documents)])
    except (OSError, TypeError):  # a source that cannot be read, a document orjson cannot write: not kept
        return None


def _referencing_sources() -> list[Path]:
    """The source files of ``referencing`` (found, not imported): another version may resolve differently."""
    spec = find_spec("referencing")
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.glob("*.py"))


def _read(path: Path) -> dict[str, Any]:
    try:
        document = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise CatalogError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("$id"), str):
        raise CatalogError(f"{path}: a schema must be a JSON object with a string $id")
    return document


@cache
def default_catalog() -> Catalog:
    """Kvlog's own catalog, as shipped."""
    return Catalog.load([data_dir("schemas")])
