"""What a schema says of each field is read once, through the registry, the same for every reader.

Codegen, the text-log grammar and the naming rules rely on these facts; a field typed through a
shared definition must read exactly like one written inline, and a ``$ref`` must reach the document
its ``$id`` names, even when another document's ``$id`` ends the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvlog.errors import UnknownEventError
from kvlog.migration.errors import GrammarError
from kvlog.migration.grammar import build_generation
from kvlog.schema.catalog import Catalog, default_catalog
from kvlog.schema.codegen import python_type
from kvlog.schema.event_validator import EventValidator
from kvlog.schema.fields import Facts, fields
from kvlog.schema.resources import data_dir

CATALOG = default_catalog()
ACME = "https://acme.example/schemas/"
KVLOG_COMMON = "https://kvlog.dev/schemas/_common.json#/$defs/"


def test_a_field_typed_through_a_shared_definition_reads_like_one_written_inline() -> None:
    allocation = CATALOG.fields("kv_pool.allocation", 2)
    k_bytes = allocation["k_bytes"]  # {"$ref": "../_common.json#/$defs/bytes"}
    assert k_bytes.facts.types == frozenset({"integer"})
    assert not k_bytes.facts.signed, "the shared bytes type has minimum 0"
    assert not k_bytes.facts.nullable
    assert k_bytes.facts.kind == "integer"
    assert k_bytes.facts == Facts.of({"type": "integer", "minimum": 0})
    dtype = allocation["dtype"]  # {"$ref": ".../dtype"}: type ["string", "null"]
    assert (dtype.facts.types, dtype.facts.nullable, dtype.facts.kind) == (
        frozenset({"string", "null"}),
        True,
        "string",
    )
    assert python_type(dtype.facts) == "str | None"


def test_nullable_is_read_from_a_type_list_an_anyof_a_oneof_and_an_enum() -> None:
    allocation = CATALOG.fields("kv_pool.allocation", 2)
    assert allocation["num_tokens"].facts.nullable, 'type ["integer", "null"]'
    committed = allocation["committed_bytes"].facts  # anyOf: [{"$ref": bytes}, {"type": "null"}]
    assert (committed.types, committed.nullable, committed.signed) == (frozenset({"integer", "null"}), True, False)
    label = allocation["label"].facts  # type ["string", "null"]: any name the server prints
    assert (label.kind, label.choices, label.nullable) == ("string", (), True)
    enum = Facts.of({"enum": ["Full", "SWA", None]})
    assert (enum.kind, enum.choices, enum.nullable) == ("enum", ("Full", "SWA"), True)
    assert not allocation["layout"].facts.nullable, 'enum ["mha", "mla"]'
    one_of = Facts.of({"oneOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
    assert (one_of.types, one_of.nullable, one_of.signed) == (frozenset({"integer", "null"}), True, False)
    assert not Facts.of({"type": "string"}).nullable
    assert not Facts.of({}).nullable, "a schema that does not restrict the type does not name null"


def test_requiredness_is_the_top_level_required_list() -> None:
    allocation = CATALOG.fields("kv_pool.allocation", 2)
    assert allocation["layout"].required
    assert allocation["num_tokens"].required
    assert not allocation["k_bytes"].required, "required only when layout is mha (if/then)"
    assert not allocation["pid"].required


@pytest.mark.parametrize(
    ("schema", "signed"),
    [
        ({"type": "integer"}, True),
        ({"type": "integer", "minimum": 0}, False),
        ({"type": "integer", "minimum": -1}, True),
        ({"type": "integer", "exclusiveMinimum": -1}, False),  # > -1: at least 0
        ({"type": ["integer", "null"], "exclusiveMinimum": -1}, False),
        ({"type": "number", "exclusiveMinimum": -1}, True),  # -0.5 is allowed
        ({"type": "number", "exclusiveMinimum": 0}, False),
        ({"type": "integer", "allOf": [{"minimum": 0}]}, False),
        ({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "integer"}]}, True),
        ({"enum": [0, 4096]}, False),
        ({"enum": [-1, 0]}, True),
        ({"type": "string"}, False),
    ],
)
def test_signedness_comes_from_minimum_and_exclusive_minimum(schema: dict[str, Any], signed: bool) -> None:
    assert Facts.of(schema).signed is signed


def test_a_signed_difference_in_the_catalog_is_signed() -> None:
    freed = CATALOG.fields("kv_pool.sleep", 1)["measured_freed_bytes"].facts  # no minimum: may be negative
    assert (freed.types, freed.signed) == (frozenset({"integer", "null"}), True)


def test_codegen_takes_each_python_type_from_the_facts() -> None:
    allocation = CATALOG.fields("kv_pool.allocation", 2)
    assert python_type(allocation["k_bytes"].facts) == "int"
    assert python_type(allocation["committed_bytes"].facts) == "int | None"
    assert python_type(allocation["label"].facts) == "str | None"
    assert python_type(Facts.of({"enum": ["Full", "SWA", None]})) == 'Literal["Full", "SWA"] | None'
    assert python_type(allocation["arena_ids"].facts) == "list[str]"
    with pytest.raises(ValueError, match="give its schema a type or an enum"):
        python_type(Facts.of({"description": "anything"}))


def test_an_unknown_event_or_version_says_so() -> None:
    with pytest.raises(UnknownEventError, match="unknown event 'nope'"):
        CATALOG.fields("nope", 1)
    with pytest.raises(UnknownEventError, match="unknown version 9"):
        CATALOG.fields("kv_pool.allocation", 9)


def _acme_catalog(root: Path) -> Catalog:
    """kvlog's catalog plus a user's whose shared file is also named ``_common.json``, with other definitions."""
    common = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{ACME}_common.json",
        "$defs": {
            "bytes": {"type": ["integer", "null"], "minimum": 0},  # kvlog's bytes is not nullable
            "ticks": {"type": "integer"},  # kvlog's _common.json has no ticks
            "tally": {"$ref": "#/$defs/ticks"},  # a chain of references
        },
    }
    event = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{ACME}acme.alloc/v1.json",
        "type": "object",
        "$defs": {"state": {"enum": ["idle", "busy"]}},
        "properties": {
            "event": {"const": "acme.alloc"},
            "schema_version": {"const": 1},
            "timestamp": {"$ref": f"{KVLOG_COMMON}timestamp"},
            "level": {"$ref": f"{KVLOG_COMMON}level"},
            "reserved_bytes": {"$ref": "../_common.json#/$defs/bytes"},
            "ticks": {"$ref": "../_common.json#/$defs/tally"},
            "state": {"$ref": "#/$defs/state"},
        },
        "required": ["event", "schema_version", "timestamp", "level", "reserved_bytes", "ticks", "state"],
        "additionalProperties": False,
    }
    (root / "acme.alloc").mkdir(parents=True)
    (root / "_common.json").write_text(json.dumps(common))
    (root / "acme.alloc" / "v1.json").write_text(json.dumps(event))
    return Catalog.load([data_dir("schemas"), root])


def test_ids_ending_alike_resolve_to_the_document_the_ref_names(tmp_path: Path) -> None:
    catalog = _acme_catalog(tmp_path)
    assert [i for i in catalog.shared if i.endswith("/_common.json")] == [
        "https://kvlog.dev/schemas/_common.json",
        f"{ACME}_common.json",
    ], "two shared documents whose $id ends alike, kvlog's first"
    acme = catalog.fields("acme.alloc", 1)
    assert acme["reserved_bytes"].facts.types == frozenset({"integer", "null"}), "acme's bytes, not kvlog's"
    assert acme["ticks"].facts.types == frozenset({"integer"}), "a definition only acme's file has, through a chain"
    assert acme["state"].facts.choices == ("idle", "busy"), "a local $defs entry"
    assert acme["level"].facts.choices == ("debug", "info", "warning", "error", "critical"), "an absolute $ref"
    assert fields(catalog.schema("acme.alloc", 1), catalog.registry) == acme


def test_a_text_generation_reads_its_placeholders_through_the_same_registry(tmp_path: Path) -> None:
    catalog = _acme_catalog(tmp_path)
    text = "Pool {state}: reserved={reserved_bytes} ticks={ticks}"
    generation = build_generation(
        "sglang-text/2026-01", {"catalog_version": 1, "templates": [{"event": "acme.alloc", "text": text}]}, catalog
    )
    recognised = generation.recognise("Pool busy: reserved=None ticks=-3")
    assert recognised is not None
    assert recognised.parsed.fields == {"state": "busy", "reserved_bytes": None, "ticks": -3}
    assert generation.recognise("Pool gone: reserved=1 ticks=2") is None, "state is one of its enum values"


def test_a_reference_that_does_not_resolve_fails_the_generation_with_its_place(tmp_path: Path) -> None:
    _acme_catalog(tmp_path)
    broken = json.loads((tmp_path / "acme.alloc" / "v1.json").read_text())
    broken["properties"]["ticks"] = {"$ref": "../_common.json#/$defs/tock"}
    (tmp_path / "acme.alloc" / "v1.json").write_text(json.dumps(broken))
    catalog = Catalog.load([data_dir("schemas"), tmp_path])
    document = {"catalog_version": 1, "templates": [{"event": "acme.alloc", "text": "ticks={ticks}"}]}
    with pytest.raises(GrammarError, match=r"acme\.alloc@1: \$ref '\.\./_common\.json#/\$defs/tock' at "):
        build_generation("sglang-text/2026-01", document, catalog)


def test_both_validation_engines_resolve_a_ref_into_the_same_document(tmp_path: Path) -> None:
    catalog = _acme_catalog(tmp_path)
    head = {"event": "acme.alloc", "schema_version": 1, "timestamp": "2026-12-01T00:00:00Z", "level": "info"}
    validator = EventValidator(catalog)
    valid = {**head, "reserved_bytes": None, "ticks": 1, "state": "idle"}
    assert validator.is_valid(valid), "the compiled engine reads acme's nullable bytes"
    assert validator.violations(valid) == [], "and so does the reference engine"
    assert not validator.is_valid({**valid, "reserved_bytes": -1})
    assert [v.path for v in validator.violations({**valid, "reserved_bytes": -1})] == ["$.reserved_bytes"]
    ids = [document["$id"] for document in catalog.documents]
    assert len(ids) == len(set(ids)) == len(catalog.shared) + len(catalog.paths)
