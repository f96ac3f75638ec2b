"""Validating events against the catalog.

Two engines, one contract: a compiled validator (jsonschema-rs) answers "valid?" on the hot path,
where almost every event is valid, and the reference implementation (jsonschema, Draft 2020-12) is
asked only when an event fails, so every reported error comes from the source-of-truth engine.
The test suite checks that both engines agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, cast

from kvlog.schema.catalog import Catalog, catalog_version, default_catalog
from kvlog.schema.readings import json_text

if TYPE_CHECKING:
    import jsonschema_rs
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


#: the shared definitions' id, where the provenance of a migrated event is defined
_COMMON = "https://kvlog.dev/schemas/_common.json"


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
        import jsonschema_rs  # noqa: PLC0415 - imported with the first validator: a log may hold no event

        return jsonschema_rs.Registry([(doc["$id"], dict(doc)) for doc in self.catalog.documents])

    @cached_property
    def provenance_problem(self) -> Callable[[object], str | None]:
        """Why a ``migrated`` value is not kvlog's provenance (``_common.json#/$defs/migrated``), or None.

        ``kvlog migrate`` fills in the provenance of the old events it upgrades: another tool's object
        under that name must be refused whole, not half filled in (or crashed on). As for events, the
        compiled validator answers and the reference one explains, with the path into the event.
        """
        import jsonschema_rs  # noqa: PLC0415
        from jsonschema import Draft202012Validator  # noqa: PLC0415

        definition = dict(default_catalog().shared[_COMMON]["$defs"]["migrated"])  # kvlog's, whatever the catalog
        is_valid = jsonschema_rs.validator_for(definition).is_valid
        reference = Draft202012Validator(definition)

        def problem(migrated: object) -> str | None:
            with suppress(ValueError):  # a value the compiled validator cannot take (a number keeping its text)
                if is_valid(migrated):
                    return None
            errors = sorted(reference.iter_errors(migrated), key=_error_order)
            if not errors:
                return None
            first = _violations(errors[0])[0]
            return f"$.migrated{first.path.removeprefix('$')}: {first.message}"

        return problem

    def is_valid(self, event: Mapping[str, Any]) -> bool:
        """Answer quickly whether ``event`` is valid; unknown events and versions are invalid."""
        try:
            return self.fast_check(event.get("event"), event.get("schema_version"))(event)
        except ValueError:  # a value the compiled validator cannot take (a number keeping its source text)
            return not self.violations(event)

    def fast_check(self, name: object, version: object) -> Callable[[object], bool]:
        """The compiled "valid?" test for events claiming ``name@version`` (never-valid when unknown).

        Hot loops keep these by ``(name, version)`` so that each event costs one dict lookup and one
        call into the compiled validator. Versions Python finds equal (``1``, ``1.0``, ``True``) are
        one key there, so they get one check: that of the catalog version, whose ``schema_version``
        constant then accepts ``1.0`` and refuses ``True`` as JSON Schema says. A check that
        depended on which of them came first would judge a valid event by an invalid one's verdict.
        """
        try:
            check = self._fast.get((name, version))  # type: ignore[arg-type]
        except TypeError:  # an unhashable name or version (a JSON list or object): not a catalog event
            return _never_valid
        return check if check is not None else self._compile_fast(name, version)

    def violations(self, event: object) -> list[Violation]:
        """Every reason ``event`` is invalid, from the Draft 2020-12 reference validator.

        A valid event costs one call into the compiled validator: the reference validator, which
        explains, runs only on failures.
        """
        if not isinstance(event, dict):
            return [Violation("$", f"an event is a JSON object, not {type(event).__name__}")]
        compiled_rejects = False
        with suppress(ValueError):  # a value the compiled validator cannot take: the reference one decides
            if self.fast_check(event.get("event"), event.get("schema_version"))(event):
                return []
            compiled_rejects = True
        name, version = event.get("event"), event.get("schema_version")
        if not isinstance(name, str):
            return [Violation("$.event", "missing or not a string: every event needs a name")]
        if name not in self.catalog.schemas:
            return [Violation("$.event", f"unknown event {name!r}")]
        number = catalog_version(version)
        if number is None or number not in self.catalog.schemas[name]:
            known = ", ".join(str(v) for v in self.catalog.versions(name))
            if "schema_version" not in event:
                return [
                    Violation("$.schema_version", f"missing: every event names its version of {name} (known: {known})")
                ]
            return [Violation("$.schema_version", f"unknown version {json_text(version)} of {name} (known: {known})")]
        validator = self._reference_validator(name, number)
        errors = sorted(validator.iter_errors(event), key=_error_order)
        found = [violation for error in errors for violation in _violations(error)]
        if not found and compiled_rejects:  # the engines disagree: an invalid event is never left unexplained
            return [
                Violation("$", "rejected by the compiled validator (jsonschema-rs); the reference one finds no reason")
            ]
        return found

    def _compile_fast(self, name: object, version: object) -> Callable[[object], bool]:
        key = self._catalog_key(name, version)
        if key is None:
            return _never_valid
        check = self._fast.get(key)
        if check is None:
            check = self._fast[key] = self._compiled_check(*key)
        return check

    def _catalog_key(self, name: object, version: object) -> tuple[str, int] | None:
        """The catalog schema whose check judges ``name@version`` (see ``fast_check``); None for none."""
        number = catalog_version(int(version) if type(version) is bool else version)
        if not isinstance(name, str) or number is None or number not in self.catalog.schemas.get(name, {}):
            return None
        return name, number

    def _compiled_check(self, name: str, version: int) -> Callable[[object], bool]:
        """The compiled "valid?" test of one catalog schema."""
        import jsonschema_rs  # noqa: PLC0415

        schema = self.catalog.schema(name, version)
        check: Callable[[object], bool] = jsonschema_rs.validator_for(dict(schema), registry=self._rs_registry).is_valid
        return check

    def _reference_validator(self, name: str, version: int) -> Draft202012Validator:
        validator = self._reference.get((name, version))
        if validator is None:
            schema = self.catalog.schema(name, version)
            validator = _reference_engine()(schema, registry=self.catalog.registry)
            self._reference[name, version] = validator
        return validator


def _never_valid(_event: object) -> bool:
    return False


@cache
def _reference_engine() -> type[Draft202012Validator]:
    """The reference Draft 2020-12 validator (jsonschema), with ``pattern`` matched as the specification says.

    A ``pattern`` is an ECMA-262 regular expression, whose ``$`` matches only at the end of the
    string; Python's ``re``, which jsonschema uses, also matches it before a final newline, so it
    would find nothing wrong with a timestamp ending in one. The compiled engine's regular
    expressions follow ECMA-262: the reference engine asks it whether a string matches.
    """
    from jsonschema import Draft202012Validator, validators  # noqa: PLC0415 - needed only once an event fails

    extended: type[Draft202012Validator] = validators.extend(  # type: ignore[no-untyped-call] # jsonschema's own
        Draft202012Validator, {"pattern": _ecma_pattern}
    )
    return extended


def _ecma_pattern(validator: Draft202012Validator, pattern: str, instance: object, _schema: object) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415

    if validator.is_type(instance, "string") and not _matches(pattern)(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _matches(pattern: str) -> Callable[[object], bool]:
    import jsonschema_rs  # noqa: PLC0415

    check: Callable[[object], bool] = jsonschema_rs.validator_for({"$schema": _DRAFT, "pattern": pattern}).is_valid
    return check


_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _error_order(error: ValidationError) -> tuple[str, ...]:
    return tuple(str(part) for part in error.absolute_path)


def _violations(error: ValidationError) -> list[Violation]:
    """The reference engine's error, pointed at the field a reader has to look at.

    jsonschema reports a missing or unknown field at the enclosing object (``$``); a reader of
    ``kvlog validate`` wants the path of the field itself, so those two are re-pointed, one per field.
    """
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        missing = [name for name in cast(list[str], error.validator_value) if name not in instance]
        for name in missing:
            if error.message == f"{name!r} is a required property":
                return [missing_field(error.json_path, name)]
    if error.validator == "additionalProperties" and isinstance(instance, dict) and error.validator_value is False:
        declared = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        unknown = [name for name in instance if name not in declared]
        if unknown:
            return [unknown_field(error.json_path, name) for name in unknown]
    return [Violation(error.json_path, error.message)]


def missing_field(path: str, name: str) -> Violation:
    """A required field ``name`` of the object at ``path`` is missing: said at the field, by every engine.

    Validators report a missing or unknown field at the enclosing object (``$``); a reader of ``kvlog
    validate`` or ``kvlog check`` wants the field itself, worded the same whichever engine found it.
    """
    return Violation(f"{path}.{name}", "required field is missing")


def unknown_field(path: str, name: str) -> Violation:
    """Field ``name`` of the object at ``path`` is not in its schema, said at the field, by every engine."""
    return Violation(
        f"{path}.{name}", "unknown field (not in this event's schema; engine-specific fields go under ext)"
    )
