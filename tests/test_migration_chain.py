"""The migration chain as `kvlog check` and `kvlog migrate` see it: loading, paths, examples, broken files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kvlog.errors import KvlogError
from kvlog.migration import MigrationError, Step, load_chain
from kvlog.migration.errors import ApplyError, OpError
from kvlog.migration.ops import compile_op
from kvlog.schema.catalog import Catalog, default_catalog
from kvlog.schema.event_validator import EventValidator
from kvlog.schema.resources import data_dir

CHAIN = load_chain()
VALIDATOR = EventValidator()
CATALOG = default_catalog()


def example_cases() -> list[Any]:
    return [
        pytest.param(step, number, id=f"{step.id}#{number}")
        for step in CHAIN.steps
        for number in range(len(step.examples))
    ]


@pytest.mark.parametrize(("step", "number"), example_cases())
def test_every_declared_example_holds_and_is_a_valid_event(step: Step, number: int) -> None:
    given, expected = step.examples[number]
    assert step.apply(given) == expected
    assert VALIDATOR.violations(expected) == []


@pytest.mark.parametrize("step", [s for s in CHAIN.steps if s.invertible], ids=lambda s: s.id)
def test_invertible_steps_lose_nothing_on_the_way_back(step: Step) -> None:
    assert step.event is not None and step.from_version is not None
    back = CHAIN.path(step.event, step.to_version, step.from_version)
    for given, _ in step.examples:
        there = step.apply(given)
        again = there
        for reverse in back:
            again = reverse.apply(again)
        # a field the source did not have may come back as null, which its schema reads the same way
        restored = {k: v for k, v in again.items() if k != "migrated" and (k in given or v is not None)}
        assert restored == {k: v for k, v in given.items() if k != "migrated"}


def test_apply_does_not_change_its_input() -> None:
    step = CHAIN.covers("kv_arena.ready", 1, 2)
    assert step is not None
    given, _ = step.examples[0]
    before = repr(given)
    step.apply(given)
    assert repr(given) == before


def test_contract_fields() -> None:
    step = CHAIN.covers("kv_pool.allocation", 2, 1)
    assert step is not None
    assert (step.id, step.source, step.target) == (
        "kv_pool.allocation/v2-to-v1",
        "kv_pool.allocation@2",
        "kv_pool.allocation@1",
    )
    assert (step.from_version, step.to_version, step.invertible) == (2, 1, False)
    assert step.path == data_dir("migrations") / "kv_pool.allocation" / "v2-to-v1.toml"
    text = next(s for s in CHAIN.steps if s.source == "sglang-text/2025-01")
    assert (text.event, text.from_version, text.to_version, text.target) == (None, None, 1, "catalog@1")


def test_every_older_version_and_every_text_event_reaches_the_latest() -> None:
    for event in CATALOG.events():
        for version in CATALOG.versions(event):
            route = CHAIN.path(event, version, CATALOG.latest(event))
            assert [s.to_version for s in route] == list(range(version + 1, CATALOG.latest(event) + 1))
            back = CHAIN.path(event, CATALOG.latest(event), version)
            assert len(back) == CATALOG.latest(event) - version
    for generation in CHAIN.generations():
        for template, version in generation.templates():
            CHAIN.path(template.event, version, CATALOG.latest(template.event))


def test_text_formats_are_ordered_oldest_first() -> None:
    sglang = [source for source in CHAIN.text_formats() if source.startswith("sglang-text/")]
    assert sglang == [
        "sglang-text/2024-01-usage",
        "sglang-text/2024-08-updates",
        "sglang-text/2025-01",
        "sglang-text/2025-03-graphs",
        "sglang-text/2025-06",
        "sglang-text/2025-10-buffers",
        "sglang-text/2025-11-aux-buffers",
        "sglang-text/2026-04-host-pools",
        "sglang-text/2026-06",
        "sglang-text/2026-07-postcapture",
        "sglang-text/2026-07-steps",
        "sglang-text/2026-08",
        "sglang-text/2026-08-05",
    ]
    assert [g.id for g in CHAIN.generations("sglang")] == sglang


def test_no_path_and_no_cover() -> None:
    with pytest.raises(MigrationError, match=r"no migration path from kv_pool.allocation@2 to kv_pool.allocation@7"):
        CHAIN.path("kv_pool.allocation", 2, 7)
    assert CHAIN.covers("kv_pool.allocation", 1, 7) is None
    assert CHAIN.path("kv_memory.pool_end", 1, 1) == []


def test_a_step_rejects_an_event_of_another_version() -> None:
    step = CHAIN.covers("kv_pool.allocation", 1, 2)
    assert step is not None
    with pytest.raises(MigrationError, match=r"expects kv_pool\.allocation@1"):
        step.apply({"event": "kv_pool.allocation", "schema_version": 2})


def copy_migrations(tmp_path: Path) -> Path:
    target = tmp_path / "migrations"
    shutil.copytree(data_dir("migrations"), target)
    return target


BROKEN = [
    ("kv_pool.allocation/v1-to-v2.toml", "event = [", "invalid TOML"),
    ("kv_pool.allocation/v1-to-v2.toml", 'op = "default"', "unknown op 'defualt'"),
    ("kv_pool.allocation/v1-to-v2.toml", 'field = "pool"', "allocation@2 does not"),
    ("kv_pool.allocation/v2-to-v1.toml", "invertible = false", "cannot declare itself invertible"),
    ("kv_arena.ready/v1-to-v2.toml", 'from = "reserved_bytes"', "reads reserved_byts"),
    ("sglang-text/2025-01.toml", "catalog_version = 1", "catalog_version must be"),
    ("sglang-text/2025-06.toml", "{num_tokens}", "has no field num_tokns"),
]
REPLACEMENTS = {
    "event = [": None,
    'op = "default"': 'op = "defualt"',
    'field = "pool"': 'field = "pool_name"',
    "invertible = false": "invertible = true",
    'from = "reserved_bytes"': 'from = "reserved_byts"',
    "catalog_version = 1": "catalog_version = 9",
    "{num_tokens}": "{num_tokns}",
}


@pytest.mark.parametrize(("relative", "needle", "message"), BROKEN, ids=[b[2] for b in BROKEN])
def test_broken_migration_files_are_named(tmp_path: Path, relative: str, needle: str, message: str) -> None:
    root = copy_migrations(tmp_path)
    path = root / relative
    text = path.read_text()
    replacement = REPLACEMENTS[needle]
    path.write_text(text + "\nevent = [\n" if replacement is None else text.replace(needle, replacement, 1))
    with pytest.raises(MigrationError) as caught:
        load_chain(root)
    assert isinstance(caught.value, KvlogError)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_a_step_for_a_version_the_catalog_lacks_is_refused(tmp_path: Path) -> None:
    root = copy_migrations(tmp_path)
    source = root / "kv_pool.allocation" / "v1-to-v2.toml"
    target = root / "kv_pool.allocation" / "v2-to-v3.toml"
    target.write_text(
        source.read_text().replace("from_version = 1", "from_version = 2").replace("to_version = 2", "to_version = 3")
    )
    with pytest.raises(MigrationError, match=r"v2-to-v3.toml: unknown version 3 of event 'kv_pool.allocation'"):
        load_chain(root)


def test_a_new_version_is_a_new_file_not_a_code_change(tmp_path: Path) -> None:
    """A v2 of an event: one schema file and one migration file, loaded, linked and applied by the same engine."""
    schemas = tmp_path / "schemas"
    shutil.copytree(data_dir("schemas"), schemas)
    v1 = json.loads((schemas / "kv_memory.pool_end" / "v1.json").read_text())
    v2 = {**v1, "$id": v1["$id"].replace("v1.json", "v2.json")}
    v2["properties"] = {**v1["properties"], "schema_version": {"const": 2}, "device": {"type": ["integer", "null"]}}
    v2["required"] = [*v1["required"], "device"]
    (schemas / "kv_memory.pool_end" / "v2.json").write_text(json.dumps(v2))
    root = copy_migrations(tmp_path)
    (root / "kv_memory.pool_end").mkdir()
    (root / "kv_memory.pool_end" / "v1-to-v2.toml").write_text(
        """
description = "v2 says on which device the memory was free; old lines did not"
event = "kv_memory.pool_end"
from_version = 1
to_version = 2
invertible = true
[[ops]]
op = "default"
field = "device"
value = { json = "null" }
[[examples]]
input = '''{"event": "kv_memory.pool_end", "schema_version": 1, "timestamp": "2026-01-01T00:00:00Z",
  "level": "info", "avail_bytes": 1}'''
output = '''{"event": "kv_memory.pool_end", "schema_version": 2, "timestamp": "2026-01-01T00:00:00Z",
  "level": "info", "avail_bytes": 1, "device": null,
  "migrated": {"source_format": "kvlog-json/v1", "steps": ["kv_memory.pool_end/v1-to-v2"]}}'''
"""
    )
    chain = load_chain(root, Catalog.load([schemas]))
    step = chain.covers("kv_memory.pool_end", 1, 2)
    assert step is not None
    given, expected = step.examples[0]
    assert step.apply(given) == expected
    assert chain.path("kv_memory.pool_end", 1, 2) == [step]


def test_ops_convert_map_derive() -> None:
    event: dict[str, Any] = {"size": 1.5, "kind": "FABRIC", "device": None}
    compile_op({"op": "convert", "field": "size", "from_unit": "gib", "to_unit": "bytes"}).run(event)
    compile_op({"op": "map", "field": "kind", "values": {"FABRIC": "fabric"}}).run(event)
    compile_op({"op": "derive", "field": "backend", "from": "device", "when_null": "host", "otherwise": "cuda"}).run(
        event
    )
    assert event == {"size": 1610612736, "kind": "fabric", "device": None, "backend": "host"}
    with pytest.raises(ApplyError, match="has no mapping"):
        compile_op({"op": "map", "field": "kind", "values": {"X": "y"}}).run({"kind": "Z"})
    with pytest.raises(OpError, match="cannot convert gib to s"):
        compile_op({"op": "convert", "field": "size", "from_unit": "gib", "to_unit": "s"})
    with pytest.raises(OpError, match="unknown hook"):
        compile_op({"op": "hook", "name": "nope"})


def test_drop_records_what_is_lost_and_rename_moves_the_notes() -> None:
    event: dict[str, Any] = {
        "a": 1,
        "b": 2,
        "migrated": {
            "source_format": "x",
            "uncertainty_bytes": {"a": 5},
            "inferred": {"b": {"rule": "r", "evidence": "e"}},
        },
    }
    compile_op({"op": "rename", "from": "a", "to": "c"}).run(event)
    compile_op({"op": "drop", "fields": ["b", "zz"]}).run(event)
    assert event == {"c": 1, "migrated": {"source_format": "x", "uncertainty_bytes": {"c": 5}, "lost": ["b"]}}
