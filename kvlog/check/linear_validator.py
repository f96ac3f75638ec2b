"""Validating events against a catalog under review: linear-time patterns, broken schemas tolerated.

``kvlog check`` validates migration examples and golden logs against schemas a pull request wrote.
``EventValidator`` explains a failure with the reference engine, whose ``pattern`` uses Python's
backtracking ``re``: ``^(a+)+$`` against 30 characters took a minute. Here both the answer and the
explanation come from jsonschema-rs with its ``regex``-crate engine, which matches ECMA-262 patterns
in linear time (and refuses lookaround and backreferences, which need backtracking). A schema that
does not compile, or that the structure rules found broken, makes its events "cannot be validated"
instead of failing the whole run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema_rs

from kvlog.schema.catalog import Catalog, catalog_version
from kvlog.schema.event_validator import EventValidator, Violation, missing_field, unknown_field


def linear(schema: Any, registry: jsonschema_rs.Registry | None = None) -> jsonschema_rs.Validator:
    """``schema`` compiled with linear-time pattern matching; raises ``ValueError`` when it cannot be."""
    try:
        return jsonschema_rs.validator_for(schema, registry=registry, pattern_options=jsonschema_rs.RegexOptions())
    except jsonschema_rs.ValidationError as exc:
        raise ValueError(exc.message) from None


class CheckValidator(EventValidator):
    """An ``EventValidator`` for a catalog under review; never backtracks, never raises on a broken schema."""

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        self._linear: dict[tuple[str, int], jsonschema_rs.Validator | str] = {}

    def _compiled(self, name: str, version: int) -> jsonschema_rs.Validator | str:
        """The compiled schema of ``name@version``, or why it cannot be compiled."""
        compiled = self._linear.get((name, version))
        if compiled is None:
            try:
                compiled = linear(dict(self.catalog.schema(name, version)), self._rs_registry)
            except (ValueError, jsonschema_rs.ReferencingError) as exc:
                compiled = f"cannot be validated: its schema does not compile: {exc}"
            self._linear[name, version] = compiled
        return compiled

    def _compiled_check(self, name: str, version: int) -> Callable[[object], bool]:
        compiled = self._compiled(name, version)
        return compiled.is_valid if not isinstance(compiled, str) else _never_valid

    def violations(self, event: object) -> list[Violation]:
        """Every reason ``event`` is invalid, from jsonschema-rs; events of no catalog schema as the base says."""
        key = _claimed(event)
        if key is None or key[1] not in self.catalog.schemas.get(key[0], {}):
            return super().violations(event)  # not an event of this catalog: answered before any schema is used
        compiled = self._compiled(*key)
        if isinstance(compiled, str):
            return [Violation("$", compiled)]
        try:
            errors = sorted(compiled.iter_errors(event), key=lambda e: [str(p) for p in e.instance_path])
        except ValueError as exc:  # jsonschema-rs: "Recursion limit reached" on a deeply nested event
            return [Violation("$", f"cannot be validated: {exc}")]
        return [violation for error in errors for violation in _violations(error)]


def _claimed(event: object) -> tuple[str, int] | None:
    if not isinstance(event, dict):
        return None
    name, version = event.get("event"), event.get("schema_version")
    number = catalog_version(version)
    return (name, number) if isinstance(name, str) and number is not None else None


def _never_valid(_event: object) -> bool:
    return False


def _violations(error: jsonschema_rs.ValidationError) -> list[Violation]:
    """jsonschema-rs's error, pointed at the field a reader looks at, as ``EventValidator`` does."""
    path = json_path(error.instance_path)
    kind = error.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
        return [missing_field(path, kind.property)]
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
        return [unknown_field(path, name) for name in kind.unexpected]
    return [Violation(path, error.message)]


def json_path(parts: list[str | int]) -> str:
    """``$.a[0].b``: the JSONPath of an instance location, as the reference engine writes it."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)
