"""Validating events against the catalog.

Two engines, one contract: a compiled validator (jsonschema-rs) answers "valid?" on the hot path,
where almost every event is valid, and the reference implementation (jsonschema, Draft 2020-12) is
asked only when an event fails, so every reported error comes from the source-of-truth engine.
The test suite checks that both engines agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from kvlog.catalog import Catalog, default_catalog


@dataclass(frozen=True)
class Violation:
    """One reason an event is invalid: where (a JSON path into the event) and what."""

    path: str
    message: str


class EventValidator:
    """Validates events of any name and version defined by a catalog."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or default_catalog()
        self._fast: dict[tuple[str, int], Callable[[object], bool]] = {}
        self._reference: dict[tuple[str, int], Draft202012Validator] = {}

    @cached_property
    def _rs_registry(self) -> jsonschema_rs.Registry:
        documents = [*self.catalog.shared.values()]
        documents += [s for versions in self.catalog.schemas.values() for s in versions.values()]
        return jsonschema_rs.Registry([(doc["$id"], dict(doc)) for doc in documents])

    def is_valid(self, event: Mapping[str, Any]) -> bool:
        """Answer quickly whether ``event`` is valid; unknown events and versions are invalid."""
        key = (event.get("event"), event.get("schema_version"))
        check = self._fast.get(key)  # type: ignore[arg-type]
        if check is None:
            check = self._compile_fast(key)
        return check(event)

    def violations(self, event: object) -> list[Violation]:
        """Every reason ``event`` is invalid, from the Draft 2020-12 reference validator."""
        if not isinstance(event, dict):
            return [Violation("$", f"an event is a JSON object, not {type(event).__name__}")]
        name, version = event.get("event"), event.get("schema_version")
        if not isinstance(name, str):
            return [Violation("$.event", "missing or not a string: every event needs a name")]
        if name not in self.catalog.schemas:
            return [Violation("$.event", f"unknown event {name!r}")]
        if type(version) is not int or version not in self.catalog.schemas[name]:
            known = ", ".join(str(v) for v in self.catalog.versions(name))
            return [Violation("$.schema_version", f"unknown version {version!r} of {name} (known: {known})")]
        validator = self._reference_validator(name, version)
        return [_violation(error) for error in sorted(validator.iter_errors(event), key=_error_order)]

    def check(self, event: Mapping[str, Any]) -> list[Violation]:
        """Violations of ``event``; the empty list, cheaply, when it is valid."""
        return [] if self.is_valid(event) else self.violations(event)

    def _compile_fast(self, key: tuple[Any, Any]) -> Callable[[object], bool]:
        name, version = key
        if not isinstance(name, str) or type(version) is not int or version not in self.catalog.schemas.get(name, {}):
            return _never_valid
        schema = self.catalog.schema(name, version)
        check: Callable[[object], bool] = jsonschema_rs.validator_for(dict(schema), registry=self._rs_registry).is_valid
        self._fast[key] = check
        return check

    def _reference_validator(self, name: str, version: int) -> Draft202012Validator:
        validator = self._reference.get((name, version))
        if validator is None:
            schema = self.catalog.schema(name, version)
            validator = Draft202012Validator(schema, registry=self.catalog.registry)
            self._reference[name, version] = validator
        return validator


def _never_valid(_event: object) -> bool:
    return False


def _error_order(error: ValidationError) -> tuple[str, ...]:
    return tuple(str(part) for part in error.absolute_path)


def _violation(error: ValidationError) -> Violation:
    return Violation(error.json_path, error.message)
