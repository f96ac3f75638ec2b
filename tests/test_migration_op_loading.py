"""Load-time validation of every op key: a broken ``[[ops]]`` table fails when the chain loads, naming itself.

A migration file is data a reviewer reads; what it says must be what runs. So every key an op does not
take is refused, every required value is checked for its type, and an inference is recorded whole (rule
and evidence) or not at all: an op that named a rule but lost its evidence would write values without
the provenance that says they were inferred.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from migration_helpers import edited_migrations

from kvlog.migration import MigrationError, load_chain

#: one valid spec of each op, which the tests below break one key at a time
from kvlog.migration.errors import OpError
from kvlog.migration.ops import compile_op, mark_inferred, provenance, value_of

VALID: dict[str, dict[str, Any]] = {
    "rename": {"op": "rename", "from": "a", "to": "b"},
    "set": {"op": "set", "field": "a", "value": 1},
    "default": {"op": "default", "field": "a", "value": 1},
    "map": {"op": "map", "field": "a", "values": {"x": "y"}},
    "convert": {"op": "convert", "field": "a", "from_unit": "gib", "to_unit": "bytes"},
    "derive": {"op": "derive", "field": "a", "from": "b", "when_null": 1, "otherwise": 2},
    "drop": {"op": "drop", "fields": ["a"]},
    "hook": {"op": "hook", "name": "pid_from_arena_id", "reads": ["arena_id"], "writes": ["pid"]},
}
#: the keys whose value must be a non-empty string, by op
TEXT_KEYS = [
    ("rename", "from"),
    ("rename", "to"),
    ("set", "field"),
    ("default", "field"),
    ("map", "field"),
    ("convert", "field"),
    ("convert", "from_unit"),
    ("convert", "to_unit"),
    ("derive", "field"),
    ("derive", "from"),
    ("hook", "name"),
]


def spec(kind: str, **changes: Any) -> dict[str, Any]:
    """The valid spec of ``kind`` with ``changes`` (a value of ``...`` removes the key)."""
    result = {**VALID[kind], **changes}
    return {key: value for key, value in result.items() if value is not ...}


@pytest.mark.parametrize("kind", sorted(VALID))
def test_every_valid_spec_compiles_to_its_kind(kind: str) -> None:
    assert compile_op(VALID[kind]).kind == kind


@pytest.mark.parametrize("kind", [None, "renam", "", 3, ["rename"]])
def test_an_unknown_or_missing_op_names_the_known_ones(kind: Any) -> None:
    given = {"from": "a", "to": "b"} if kind is None else {"op": kind, "from": "a", "to": "b"}
    known = "(known: convert, default, derive, drop, hook, map, rename, set)"
    with pytest.raises(OpError, match=re.escape(f"unknown op {kind!r} {known}")):
        compile_op(given)


@pytest.mark.parametrize(("kind", "key"), TEXT_KEYS, ids=[f"{k}.{key}" for k, key in TEXT_KEYS])
@pytest.mark.parametrize("value", ["", ..., 7, ["a"], None], ids=["empty", "absent", "number", "list", "null"])
def test_every_name_is_a_non_empty_string(kind: str, key: str, value: Any) -> None:
    with pytest.raises(OpError, match=f"op '{kind}' needs a non-empty string '{key}'"):
        compile_op(spec(kind, **{key: value}))


@pytest.mark.parametrize("kind", sorted(VALID))
def test_every_op_refuses_a_key_it_does_not_take(kind: str) -> None:
    """A misspelt key (``evidnce``) or another op's key would otherwise be ignored without a word."""
    with pytest.raises(OpError, match=f"op '{kind}' does not take evidnce, when"):
        compile_op(spec(kind, evidnce="x", when="y"))


@pytest.mark.parametrize(
    ("kind", "key"),
    [("rename", "rule"), ("map", "evidence"), ("convert", "rule"), ("drop", "evidence"), ("hook", "rule")],
)
def test_ops_that_infer_nothing_take_no_rule_or_evidence(kind: str, key: str) -> None:
    with pytest.raises(OpError, match=f"does not take {key}"):
        compile_op(spec(kind, **{key: "x"}))


@pytest.mark.parametrize("kind", ["set", "default", "derive"])
@pytest.mark.parametrize(("given", "missing"), [({"rule": "r"}, "evidence"), ({"evidence": "e"}, "rule")])
def test_a_rule_without_its_evidence_or_evidence_without_its_rule_does_not_load(
    kind: str, given: dict[str, str], missing: str
) -> None:
    """Half an inference must not load as none: the value would be written without its provenance."""
    with pytest.raises(OpError, match=f"needs a non-empty string '{missing}'"):
        compile_op(spec(kind, **given))


@pytest.mark.parametrize("kind", ["set", "default", "derive"])
@pytest.mark.parametrize("given", [{"rule": "", "evidence": "e"}, {"rule": "r", "evidence": ""}])
def test_an_empty_rule_or_evidence_does_not_load(kind: str, given: dict[str, str]) -> None:
    with pytest.raises(OpError, match="needs a non-empty string"):
        compile_op(spec(kind, **given))


def test_a_shipped_step_whose_rule_lost_its_evidence_fails_to_load_naming_its_file(tmp_path: Path) -> None:
    evidence = 'evidence = "kv_pool.allocation@1 cannot tell'
    edited = edited_migrations(tmp_path, "kv_pool.allocation/v1-to-v2.toml", evidence, f"# {evidence}")
    with pytest.raises(MigrationError) as caught:
        load_chain(edited.parent.parent)
    assert str(caught.value) == f"{edited}: op 'default' needs a non-empty string 'evidence'"


@pytest.mark.parametrize("kind", ["set", "default"])
def test_a_setter_needs_a_value_and_says_how_to_write_null(kind: str) -> None:
    with pytest.raises(OpError, match=f"""op '{kind}' needs a 'value' \\(write null as {{ json = "null" }}\\)"""):
        compile_op(spec(kind, value=...))


@pytest.mark.parametrize("key", ["when_null", "otherwise"])
def test_derive_needs_both_values(key: str) -> None:
    with pytest.raises(OpError, match="op 'derive' needs 'when_null' and 'otherwise' values"):
        compile_op(spec("derive", **{key: ...}))


@pytest.mark.parametrize("values", [..., {}, ["x", "y"], "x=y", None])
def test_map_needs_a_non_empty_table(values: Any) -> None:
    with pytest.raises(OpError, match=r"op 'map' needs a non-empty table 'values' \(old value = new value\)"):
        compile_op(spec("map", values=values))


@pytest.mark.parametrize("fields", [..., [], "a", ["a", 1], [None], {"a": True}])
def test_drop_needs_a_non_empty_list_of_field_names(fields: Any) -> None:
    with pytest.raises(OpError, match="op 'drop' needs a non-empty list of field names 'fields'"):
        compile_op(spec("drop", fields=fields))


@pytest.mark.parametrize("key", ["reads", "writes"])
@pytest.mark.parametrize("value", ["pid", ["pid", 3], [""], {"pid": 1}, None])
def test_a_hooks_reads_and_writes_are_lists_of_field_names(key: str, value: Any) -> None:
    """``writes = "pid"`` would declare the fields p, i and d: what the engine trusts to reuse events."""
    with pytest.raises(OpError, match=f"op 'hook' needs a list of field names '{key}'"):
        compile_op(spec("hook", **{key: value}))


def test_a_hooks_reads_and_writes_may_be_left_out() -> None:
    op = compile_op(spec("hook", reads=..., writes=...))
    assert (op.reads, op.writes, op.drops) == ((), (), ())
    declared = compile_op(VALID["hook"])
    assert (declared.reads, declared.writes, declared.drops) == (("arena_id",), ("pid",), ())


def test_a_text_step_whose_hook_writes_a_string_fails_to_load_naming_its_file(tmp_path: Path) -> None:
    edited = edited_migrations(tmp_path, "sglang-text/2026-08-05.toml", 'writes = ["pid"]', 'writes = "pid"')
    with pytest.raises(MigrationError, match=r"2026-08-05.toml: op 'hook' needs a list of field names 'writes'"):
        load_chain(edited.parent.parent)


def test_an_unknown_hook_names_the_registered_ones() -> None:
    with pytest.raises(OpError, match=r"unknown hook 'nope' \(registered: deficit_from_sign, pid_from_arena_id\)"):
        compile_op(spec("hook", name="nope"))


@pytest.mark.parametrize("text", ["nul", "{", "'x'"])
def test_a_json_value_that_is_not_json_does_not_load(text: str) -> None:
    with pytest.raises(OpError, match=f"invalid JSON value {text!r}"):
        compile_op(spec("set", value={"json": text}))


def test_json_values_are_how_null_is_written_and_other_tables_are_plain_values() -> None:
    assert value_of({"json": "null"}) is None
    assert value_of({"json": '{"a": [1]}'}) == {"a": [1]}
    assert value_of({"json": "null", "x": 1}) == {"json": "null", "x": 1}  # not the JSON form
    assert value_of({"json": 5}) == {"json": 5}
    assert value_of("null") == "null"


# -- what each op declares and does: the contract load-time checks and the engine rely on -------------


def run(given: dict[str, Any], *specs: dict[str, Any]) -> dict[str, Any]:
    event = dict(given)
    for one in specs:
        compile_op(one).run(event)
    return event


def test_set_overwrites_and_default_only_fills_what_is_absent() -> None:
    assert run({"a": 0}, spec("set", value=5)) == {"a": 5}
    assert run({"a": 0}, spec("default", value=5)) == {"a": 0}
    assert run({"a": None}, spec("default", value=5)) == {"a": None}  # present, though null
    assert run({}, spec("default", value={"json": "null"})) == {"a": None}


@pytest.mark.parametrize("kind", ["set", "default"])
def test_a_setters_inference_is_recorded_with_rule_and_evidence(kind: str) -> None:
    event = run({"schema_version": 1}, spec(kind, rule="r", evidence="why"))
    assert event["migrated"] == {"source_format": "kvlog-json/v1", "inferred": {"a": {"rule": "r", "evidence": "why"}}}
    assert "migrated" not in run({}, spec(kind))


def test_a_default_that_fills_nothing_records_no_inference() -> None:
    assert run({"a": 0}, spec("default", rule="r", evidence="e")) == {"a": 0}


def test_derive_fills_by_whether_its_source_is_null_and_never_overwrites() -> None:
    derive = spec("derive", rule="r", evidence="e")
    assert run({"b": None}, derive)["a"] == 1
    assert run({}, derive)["a"] == 1
    assert run({"b": 0}, derive)["a"] == 2
    assert run({"a": 9, "b": None}, derive) == {"a": 9, "b": None}
    assert run({"b": 0}, derive)["migrated"]["inferred"] == {"a": {"rule": "r", "evidence": "e"}}
    assert "migrated" not in run({"b": 0}, spec("derive"))
    assert (compile_op(derive).reads, compile_op(derive).writes) == (("b",), ("a",))


def test_map_reads_non_string_values_by_their_json_text() -> None:
    mapping = spec("map", values={"x": "y", "1": "one", "null": "none", "true": {"json": "null"}})
    assert [run({"a": value}, mapping)["a"] for value in ("x", 1, None, True)] == ["y", "one", "none", None]
    assert run({}, mapping) == {}


def test_rename_moves_a_field_and_leaves_an_event_without_it_alone() -> None:
    assert run({"a": 1, "c": 2}, VALID["rename"]) == {"b": 1, "c": 2}
    assert run({"c": 2}, VALID["rename"]) == {"c": 2}
    op = compile_op(VALID["rename"])
    assert (op.reads, op.writes, op.drops) == (("a",), ("b",), ())


def test_a_drop_records_each_lost_field_once_with_its_notes_gone() -> None:
    event = {
        "a": 1,
        "b": 2,
        "migrated": {
            "source_format": "x",
            "lost": ["a"],
            "inferred": {"a": {"rule": "r", "evidence": "e"}, "c": {"rule": "r", "evidence": "e"}},
            "uncertainty_bytes": {"b": 5},
        },
    }
    after = run(event, spec("drop", fields=["a", "b", "absent"]))
    assert after == {
        "migrated": {"source_format": "x", "lost": ["a", "b"], "inferred": {"c": {"rule": "r", "evidence": "e"}}}
    }
    assert run({"c": 1}, spec("drop", fields=["a"])) == {"c": 1}  # nothing lost: no provenance
    op = compile_op(spec("drop", fields=["a", "b"]))
    assert (op.reads, op.writes, op.drops) == (("a", "b"), (), ("a", "b"))


def test_provenance_is_created_for_a_live_event_and_kept_for_a_migrated_one() -> None:
    live: dict[str, Any] = {"schema_version": 2, "migrated": "not an object"}
    assert provenance(live) == {"source_format": "kvlog-json/v2"}
    assert live["migrated"] == {"source_format": "kvlog-json/v2"}
    migrated: dict[str, Any] = {"migrated": {"source_format": "sglang-text/2025-01"}}
    mark_inferred(migrated, "a", "r", "e", 7)
    mark_inferred(migrated, "b", "r2", "e2")
    assert migrated["migrated"] == {
        "source_format": "sglang-text/2025-01",
        "inferred": {"a": {"rule": "r", "evidence": "e", "evidence_line": 7}, "b": {"rule": "r2", "evidence": "e2"}},
    }
