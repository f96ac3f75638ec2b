"""The catalog is a set of valid Draft 2020-12 schemas, laid out as the public contract says."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from foundation_samples import FIELDS, MLA_ALLOCATION, envelope, fields, sample
from jsonschema import Draft202012Validator

from kvlog.errors import CatalogError, UnknownEventError
from kvlog.schema.catalog import SCHEMA_BASE_URI, Catalog, default_catalog, version_in
from kvlog.schema.event_validator import EventValidator

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
SCHEMA_FILES = sorted(SCHEMAS.rglob("*.json"))
ENVELOPE = {"event", "schema_version", "timestamp", "level", "pid", "ranks", "migrated", "ext"}
CATALOG = default_catalog()
EVENT_VERSIONS = [(event, version) for event in CATALOG.events() for version in CATALOG.versions(event)]
#: the types a byte count may have: an integer, maybe null
INTEGER = (frozenset({"integer"}), frozenset({"integer", "null"}))


def test_the_shipped_catalog_is_the_repository_tree() -> None:
    assert SCHEMA_FILES, "no schema files found"
    assert {path.resolve() for path in CATALOG.paths.values()} == {
        path.resolve() for path in SCHEMA_FILES if not path.name.startswith("_")
    }


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: str(p.relative_to(SCHEMAS)))
def test_every_schema_file_passes_the_draft_2020_12_metaschema(path: Path) -> None:
    document = json.loads(path.read_text())
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(document)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: str(p.relative_to(SCHEMAS)))
def test_every_id_is_the_files_path_under_the_base_uri(path: Path) -> None:
    document = json.loads(path.read_text())
    assert document["$id"] == SCHEMA_BASE_URI + path.relative_to(SCHEMAS).as_posix()


@pytest.mark.parametrize(("event", "version"), EVENT_VERSIONS)
def test_every_event_schema_follows_the_contract(event: str, version: int) -> None:
    schema = CATALOG.schema(event, version)
    props = schema["properties"]
    assert props["event"]["const"] == event
    assert props["schema_version"]["const"] == version
    assert schema["additionalProperties"] is False
    assert props["ext"] == {"$ref": "../_common.json#/$defs/ext"}, "the declared place for extensions"
    assert {"event", "schema_version", "timestamp", "level"} <= set(schema["required"])
    assert set(props) >= ENVELOPE
    assert schema["title"] and schema["description"]
    facts = CATALOG.fields(event, version)
    for name, prop in props.items():
        if name not in ENVELOPE:
            assert _description(prop), f"{event}@{version}.{name} has no description"
        if name.endswith("_bytes"):
            assert facts[name].facts.types in INTEGER, f"{event}@{version}.{name}: sizes are integer bytes"


def _description(prop: dict[str, Any]) -> str | None:
    """A property's description, its own or that of the shared definition it refers to."""
    if "description" in prop:
        return str(prop["description"])
    ref = prop.get("$ref", "")
    if ref.startswith("../_common.json#/$defs/"):
        return str(json.loads((SCHEMAS / "_common.json").read_text())["$defs"][ref.rsplit("/", 1)[1]]["description"])
    return None


def test_every_event_version_has_a_valid_sample() -> None:
    assert set(FIELDS) <= set(EVENT_VERSIONS), "a sample for an event the catalog does not have"
    validator = EventValidator()
    for event, version in EVENT_VERSIONS:
        problems = validator.violations(sample(event, version))
        assert problems == [], f"{event}@{version}: write a sample in tests/foundation_samples.py: {problems}"


def test_catalog_version_2_contains_what_the_contract_lists() -> None:
    required = {
        "kv_arena.ready": {"arena_id", "backend", "device", "reserved_va_bytes", "granularity_bytes", "handle_type"},
        "kv_arena.commit": {"arena_id", "offset_bytes", "nbytes", "committed_bytes", "measured_committed_bytes"},
        "kv_arena.decommit": {"arena_id", "offset_bytes", "nbytes", "committed_bytes", "measured_committed_bytes"},
        "kv_arena.closed": {"arena_id", "released_bytes"},
        "kv_pool.allocation": {"pool", "label", "layout", "allocation_state", "dtype", "num_tokens", "committed_bytes"},
        "kv_pool.swa_summary": {"allocation_state", "total_bytes", "swa_tokens", "full_tokens"},
        "kv_pool.post_capture_sized": {
            "label",
            "dtype",
            "max_total_num_tokens",
            "free_bytes",
            "budget_bytes",
            "committed_bytes",
        },
        "kv_pool.unified_allocation": {"allocation_state", "total_bytes", "sub_pools", "committed_bytes"},
        "kv_host_pool.allocation": {"label", "num_tokens", "host_bytes"},
        "kv_memory.pool_end": {"avail_bytes"},
        "mamba_pool.allocation": {"label", "max_mamba_cache_size", "conv_state_bytes", "ssm_state_bytes"},
        "kvlog.schema_violation": {"violating_event", "errors"},
    }
    for event, names in required.items():
        version = CATALOG.at_catalog_version(event, 2)
        assert version is not None, event
        assert names <= set(CATALOG.schema(event, version)["properties"]), event
    assert CATALOG.versions("kv_arena.ready") == [1, 2]
    assert "reserved_bytes" in CATALOG.schema("kv_arena.ready", 1)["properties"]
    assert "allocation_state" not in CATALOG.schema("kv_pool.allocation", 1)["properties"]
    assert "mem_usage_bytes" in CATALOG.schema("kv_pool.swa_summary", 1)["properties"]
    assert CATALOG.at_catalog_version("kv_memory.pool_end", 2) == 1


def _mutants(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Invalid variants of a valid event, one defect each."""
    out = []
    for key in event:
        if key not in {"pid", "ranks"}:
            missing = dict(event)
            del missing[key]
            if key in CATALOG.schema(event["event"], event["schema_version"])["required"]:
                out.append((f"missing {key}", missing))
    out.append(("unknown field", {**event, "bogus": 1}))
    out.append(("bad timestamp", {**event, "timestamp": "2026-12-02 09:00:00"}))
    out.append(("bad level", {**event, "level": "INFO"}))
    out.append(("bad ranks", {**event, "ranks": {"TP": 0}}))
    out.append(("negative pid", {**event, "pid": -1}))
    out.append(("float version", {**event, "schema_version": "1"}))
    facts = CATALOG.fields(event["event"], event["schema_version"])
    for key, value in event.items():
        if key.endswith("_bytes") and isinstance(value, int):
            out.append((f"GB float {key}", {**event, key: 1.5}))
            if not facts[key].facts.signed:
                out.append((f"negative {key}", {**event, key: -1}))
    return out


@pytest.mark.parametrize(("event", "version"), EVENT_VERSIONS)
def test_both_validation_engines_agree_on_valid_and_invalid_events(event: str, version: int) -> None:
    validator = EventValidator()
    reference = Draft202012Validator(CATALOG.schema(event, version), registry=CATALOG.registry)
    good = sample(event, version)
    assert validator.is_valid(good)
    assert validator.violations(good) == []
    assert reference.is_valid(good)
    for label, bad in _mutants(good):
        assert not reference.is_valid(bad), label
        assert not validator.is_valid(bad), label
        assert validator.violations(bad), label


def test_layout_decides_which_byte_fields_a_pool_allocation_carries() -> None:
    validator = EventValidator()
    mla = envelope("kv_pool.allocation", 2, MLA_ALLOCATION)
    assert validator.is_valid(mla)
    assert not validator.is_valid({**mla, "k_bytes": 1})
    mha = sample("kv_pool.allocation", 2)
    assert not validator.is_valid({**mha, "kv_bytes": 1})
    without_v = dict(mha)
    del without_v["v_bytes"]
    assert [v.path for v in validator.violations(without_v)] == ["$.v_bytes"]


def test_extensions_go_under_ext() -> None:
    validator = EventValidator()
    event = sample("kv_memory.pool_end", 1)
    assert validator.is_valid({**event, "ext": {"engine": "sglang", "anything": [1, {"x": None}]}})
    assert not validator.is_valid({**event, "ext": "not an object"})


def test_a_user_catalog_can_add_events_but_not_redefine_them(tmp_path: Path) -> None:
    extra = tmp_path / "my.event"
    extra.mkdir()
    schema = copy.deepcopy(dict(CATALOG.schema("kv_memory.pool_end", 1)))
    schema["$id"] = SCHEMA_BASE_URI + "my.event/v1.json"
    schema["properties"]["event"] = {"const": "my.event", "description": "Event name."}
    (extra / "v1.json").write_text(json.dumps(schema))
    catalog = Catalog.load([SCHEMAS, tmp_path])
    assert "my.event" in catalog.events()
    assert EventValidator(catalog).is_valid(envelope("my.event", 1, fields("kv_memory.pool_end", 1)))

    clash = tmp_path / "kv_memory.pool_end"
    clash.mkdir()
    (clash / "v1.json").write_text(json.dumps(schema))
    with pytest.raises(CatalogError, match=r"kv_memory\.pool_end@1 is already defined"):
        Catalog.load([SCHEMAS, tmp_path])


def test_a_broken_schema_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "broken.event").mkdir()
    (tmp_path / "broken.event" / "v1.json").write_text("{not json")
    with pytest.raises(CatalogError, match=r"broken\.event/v1\.json: invalid JSON"):
        Catalog.load([tmp_path])


def test_only_v_n_json_names_an_event_version(tmp_path: Path) -> None:
    names = ["v1.json", "v12.json", "v0.json", "v01.json", "v2.json.bak", "V2.json", "v2.toml"]
    assert [version_in(name) for name in names] == [1, 12, None, None, None, None, None]
    (tmp_path / "my.event").mkdir()
    (tmp_path / "my.event" / "v01.json").write_text("{}")
    with pytest.raises(CatalogError, match=r"v01\.json: schema files are named v<N>\.json"):
        Catalog.load([tmp_path])


def test_unknown_events_and_versions_are_errors() -> None:
    with pytest.raises(UnknownEventError, match="unknown event 'nope'"):
        CATALOG.latest("nope")
    with pytest.raises(UnknownEventError, match=r"unknown version 9 .*known: 1, 2"):
        CATALOG.schema("kv_arena.ready", 9)
    validator = EventValidator()
    assert not validator.is_valid({**sample("kv_arena.ready", 2), "schema_version": 9})
    assert not validator.is_valid({**sample("kv_arena.ready", 2), "event": "nope"})
    assert not validator.is_valid({**sample("kv_arena.ready", 2), "event": ["unhashable"]})
