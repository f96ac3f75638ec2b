"""Schema-change pairs classified under every compatibility mode, through kvlog check's release rules.

The expected table is written first, from the Confluent Schema Registry / Karapace JSON-Schema rules:
BACKWARD means readers of the new version accept every event of the old one, FORWARD the reverse,
FULL both, *_TRANSITIVE the same against every older version (with two versions, the same answer),
NONE never fails. ``B``/``F`` below are whether the change is backward/forward compatible.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from kvlog.check.evolution import MODES, Direction, Evolution, Mode
from kvlog.check.findings import Finding
from kvlog.check.migrations import coverage
from kvlog.check.snapshot import Snapshot
from kvlog.check.structure import check_structure
from kvlog.migration import load_chain
from kvlog.schema.resources import data_dir

OPEN: dict[str, Any] = {}
CLOSED = {"additionalProperties": False}
INT = {"type": "integer"}
STR = {"type": "string"}
BYTES = {"type": "integer", "minimum": 0}

# (name, old: (properties, required, extra keywords), new: (...), B, F)
CASES: list[tuple[str, tuple[Any, ...], tuple[Any, ...], bool, bool]] = [
    ("identical", ({"a": INT}, ["a"], CLOSED), ({"a": INT}, ["a"], CLOSED), True, True),
    ("description reworded", ({"a": INT}, [], CLOSED), ({"a": {**INT, "description": "x"}}, [], CLOSED), True, True),
    (
        "optional property added, closed model",
        ({"a": INT}, [], CLOSED),
        ({"a": INT, "b": STR}, [], CLOSED),
        True,
        False,
    ),
    ("optional property added, open model", ({"a": INT}, [], OPEN), ({"a": INT, "b": STR}, [], OPEN), False, True),
    (
        "required property added, closed model",
        ({"a": INT}, [], CLOSED),
        ({"a": INT, "b": STR}, ["b"], CLOSED),
        False,
        False,
    ),
    ("required property added, open model", ({"a": INT}, [], OPEN), ({"a": INT, "b": STR}, ["b"], OPEN), False, True),
    (
        "optional property removed, closed model",
        ({"a": INT, "b": STR}, [], CLOSED),
        ({"a": INT}, [], CLOSED),
        False,
        True,
    ),
    ("optional property removed, open model", ({"a": INT, "b": STR}, [], OPEN), ({"a": INT}, [], OPEN), True, False),
    (
        "required property removed, closed model",
        ({"a": INT, "b": STR}, ["b"], CLOSED),
        ({"a": INT}, [], CLOSED),
        False,
        False,
    ),
    ("optional becomes required", ({"a": INT}, [], CLOSED), ({"a": INT}, ["a"], CLOSED), False, True),
    ("required becomes optional", ({"a": INT}, ["a"], CLOSED), ({"a": INT}, [], CLOSED), True, False),
    (
        "type widened integer -> number",
        ({"a": INT}, ["a"], CLOSED),
        ({"a": {"type": "number"}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "type narrowed number -> integer",
        ({"a": {"type": "number"}}, ["a"], CLOSED),
        ({"a": INT}, ["a"], CLOSED),
        False,
        True,
    ),
    ("type changed string -> integer", ({"a": STR}, ["a"], CLOSED), ({"a": INT}, ["a"], CLOSED), False, False),
    (
        "nullable added (type list)",
        ({"a": INT}, ["a"], CLOSED),
        ({"a": {"type": ["integer", "null"]}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "nullable removed (type list)",
        ({"a": {"type": ["integer", "null"]}}, ["a"], CLOSED),
        ({"a": INT}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "nullable added (anyOf)",
        ({"a": BYTES}, ["a"], CLOSED),
        ({"a": {"anyOf": [BYTES, {"type": "null"}]}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "enum value added",
        ({"a": {"enum": ["x", "y"]}}, ["a"], CLOSED),
        ({"a": {"enum": ["x", "y", "z"]}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "enum value removed",
        ({"a": {"enum": ["x", "y"]}}, ["a"], CLOSED),
        ({"a": {"enum": ["x"]}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "enum declared on a free string",
        ({"a": STR}, ["a"], CLOSED),
        ({"a": {"enum": ["x", "y"]}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "const widened to enum",
        ({"a": {"const": "x"}}, ["a"], CLOSED),
        ({"a": {"enum": ["x", "y"]}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "minimum tightened",
        ({"a": BYTES}, ["a"], CLOSED),
        ({"a": {"type": "integer", "minimum": 1}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "exclusiveMinimum loosened to minimum",
        ({"a": {"type": "integer", "exclusiveMinimum": 0}}, ["a"], CLOSED),
        ({"a": BYTES}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "maximum loosened",
        ({"a": {"type": "integer", "maximum": 10}}, ["a"], CLOSED),
        ({"a": {"type": "integer", "maximum": 100}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        "maxLength tightened",
        ({"a": {"type": "string", "maxLength": 64}}, ["a"], CLOSED),
        ({"a": {"type": "string", "maxLength": 32}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "multipleOf made coarser",
        ({"a": {"type": "integer", "multipleOf": 4}}, ["a"], CLOSED),
        ({"a": {"type": "integer", "multipleOf": 8}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "pattern added",
        ({"a": STR}, ["a"], CLOSED),
        ({"a": {"type": "string", "pattern": "^[0-9]+$"}}, ["a"], CLOSED),
        False,
        True,
    ),
    ("content model closed", ({"a": INT}, [], OPEN), ({"a": INT}, [], CLOSED), False, True),
    ("content model opened", ({"a": INT}, [], CLOSED), ({"a": INT}, [], OPEN), True, False),
    (
        "array items narrowed",
        ({"a": {"type": "array", "items": {"type": "number"}}}, ["a"], CLOSED),
        ({"a": {"type": "array", "items": INT}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "uniqueItems added",
        ({"a": {"type": "array", "items": STR}}, ["a"], CLOSED),
        ({"a": {"type": "array", "items": STR, "uniqueItems": True}}, ["a"], CLOSED),
        False,
        True,
    ),
    (
        "optional property added to a closed nested object",
        ({"a": {"type": "object", "properties": {"x": INT}, "additionalProperties": False}}, ["a"], CLOSED),
        ({"a": {"type": "object", "properties": {"x": INT, "y": INT}, "additionalProperties": False}}, ["a"], CLOSED),
        True,
        False,
    ),
    (
        # Conservative by design: proving one conditional implies another needs a solver, so any change
        # to an if/then is reported both ways, as not provably compatible (truly both ways are safe here:
        # event and schema_version are required, so every event already has two properties).
        "conditional requirement changed",
        ({"a": INT, "b": INT}, [], {**CLOSED, "if": {"required": ["a"]}, "then": {"required": ["b"]}}),
        (
            {"a": INT, "b": INT},
            [],
            {**CLOSED, "if": {"required": ["a"]}, "then": {"required": ["b"], "minProperties": 2}},
        ),
        False,
        False,
    ),
    (
        "field renamed",
        ({"reserved_bytes": BYTES}, ["reserved_bytes"], CLOSED),
        ({"reserved_va_bytes": BYTES}, ["reserved_va_bytes"], CLOSED),
        False,
        False,
    ),
]


# The reasons each failing direction gives, as KV204 quotes them: the path into the event and the rule's
# message, in order. A case absent here, or a direction absent from its entry, is compatible that way.
BREAKS: dict[str, dict[Direction, str]] = {
    "optional property added, closed model": {"forward": "$.b: v2 allows b, v1 rejects it (closed content model)"},
    "optional property added, open model": {"backward": "$.b: v2 rejects null, which v1 allows"},
    "required property added, closed model": {
        "backward": "$.b: v2 requires b; v1 may lack it",
        "forward": "$.b: v2 allows b, v1 rejects it (closed content model)",
    },
    "required property added, open model": {"backward": "$.b: v2 requires b; v1 may lack it"},
    "optional property removed, closed model": {"backward": "$.b: v1 allows b, v2 rejects it (closed content model)"},
    "optional property removed, open model": {"forward": "$.b: v1 rejects null, which v2 allows"},
    "required property removed, closed model": {
        "backward": "$.b: v1 allows b, v2 rejects it (closed content model)",
        "forward": "$.b: v1 requires b; v2 may lack it",
    },
    "optional becomes required": {"backward": "$.a: v2 requires a; v1 may lack it"},
    "required becomes optional": {"forward": "$.a: v1 requires a; v2 may lack it"},
    "type widened integer -> number": {"forward": "$.a: v1 accepts only integers; v2 accepts any number"},
    "type narrowed number -> integer": {"backward": "$.a: v2 accepts only integers; v1 accepts any number"},
    "type changed string -> integer": {
        "backward": "$.a: v2 accepts only integer; v1 has string values",
        "forward": "$.a: v1 accepts only string; v2 has integer values",
    },
    "nullable added (type list)": {"forward": "$.a: v1 rejects null, which v2 allows"},
    "nullable removed (type list)": {"backward": "$.a: v2 rejects null, which v1 allows"},
    "nullable added (anyOf)": {"forward": "$.a: v1 rejects null, which v2 allows"},
    "enum value added": {"forward": '$.a: v1 rejects "z", which v2 allows'},
    "enum value removed": {"backward": '$.a: v2 rejects "y", which v1 allows'},
    "enum declared on a free string": {"backward": '$.a: v2 allows only ["x","y"]; v1 allows more'},
    "const widened to enum": {"forward": '$.a: v1 rejects "y", which v2 allows'},
    "minimum tightened": {"backward": "$.a: lower bound raised from >= 0 (v1) to >= 1 (v2)"},
    "exclusiveMinimum loosened to minimum": {"forward": "$.a: lower bound raised from >= 0 (v2) to >= 1 (v1)"},
    "maximum loosened": {"forward": "$.a: upper bound lowered from <= 100 (v2) to <= 10 (v1)"},
    "maxLength tightened": {"backward": "$.a: length [0, 64] (v1) is not inside [0, 32]"},
    "multipleOf made coarser": {"backward": "$.a: v2 requires multiples of 8"},
    "pattern added": {"backward": '$.a: v2 requires pattern "^[0-9]+$"'},
    "content model closed": {"backward": "$.*: v2 accepts no value here; v1 does"},
    "content model opened": {"forward": "$.*: v1 accepts no value here; v2 does"},
    "array items narrowed": {"backward": "$.a[*]: v2 accepts only integers; v1 accepts any number"},
    "uniqueItems added": {"backward": "$.a: v2 requires unique items, v1 does not"},
    "optional property added to a closed nested object": {
        "forward": "$.a.y: v2 allows y, v1 rejects it (closed content model)"
    },
    "conditional requirement changed": {
        "backward": "$: v2 adds an if/then/else that v1 may not satisfy (kvlog found no instance that proves it)",
        "forward": "$: v1 adds an if/then/else that v2 may not satisfy (kvlog found no instance that proves it)",
    },
    "field renamed": {
        "backward": "$.reserved_bytes: v1 allows reserved_bytes, v2 rejects it (closed content model); "
        "$.reserved_va_bytes: v2 requires reserved_va_bytes; v1 may lack it",
        "forward": "$.reserved_bytes: v1 requires reserved_bytes; v2 may lack it; "
        "$.reserved_va_bytes: v2 allows reserved_va_bytes, v1 rejects it (closed content model)",
    },
}

# kvlog can neither prove these safe nor find an event that breaks them: KV204 says "not provably".
UNPROVEN = {"conditional requirement changed"}


def event_schema(
    version: int, properties: dict[str, Any], required: list[str], extra: dict[str, Any]
) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://example.test/schemas/t.e/v{version}.json",
        "type": "object",
        "properties": {"event": {"const": "t.e"}, "schema_version": {"const": version}, **properties},
        "required": ["event", "schema_version", *required],
        **extra,
    }


def snapshot(label: str, versions: dict[int, dict[str, Any]]) -> Snapshot:
    files = {f"t.e/v{v}.json": orjson.dumps(doc, option=orjson.OPT_INDENT_2) for v, doc in versions.items()}
    return Snapshot.from_files(label, files, {rel: rel for rel in files})


def release_findings(
    versions: dict[int, dict[str, Any]], released: set[int], mode: Mode, cover: Any = None
) -> list[Finding]:
    current = snapshot("working tree", versions)
    then = snapshot("REF", {v: doc for v, doc in versions.items() if v in released})
    structure = check_structure(current)
    resolved_now = structure.resolved
    assert structure.findings == [], structure.findings
    resolved_then = check_structure(then).resolved
    return Evolution(current, then, resolved_now, resolved_then).check(mode, cover or (lambda *_: None))


def expected_pass(mode: Mode, backward: bool, forward: bool) -> bool:
    kind = mode.removesuffix("_transitive")
    return {"backward": backward, "forward": forward, "full": backward and forward, "none": True}[kind]


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 25
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_change_is_classified_under_every_mode(
    name: str, old: tuple[Any, ...], new: tuple[Any, ...], backward: bool, forward: bool, mode: Mode
) -> None:
    versions = {1: event_schema(1, *old), 2: event_schema(2, *new)}
    findings = release_findings(versions, {1}, mode)
    errors = [f for f in findings if f.level == "error"]
    assert {f.rule for f in errors} <= {"KV204"}
    assert (not errors) == expected_pass(mode, backward, forward), [f.message for f in errors]
    asked: list[Direction] = {"backward": ["backward"], "forward": ["forward"], "full": ["backward", "forward"]}.get(
        mode.removesuffix("_transitive"), []
    )
    failing = [d for d in asked if not {"backward": backward, "forward": forward}[d]]
    assert len(errors) == len(failing)
    for finding, direction in zip(errors, failing, strict=True):
        assert_breaks_as_said(finding, name, direction, mode, versions)


def assert_breaks_as_said(
    finding: Finding, name: str, direction: Direction, mode: Mode, versions: dict[int, dict[str, Any]]
) -> None:
    """The KV204 finding of one direction: its reasons, its counterexample (a real break), its file and line."""
    writer, reader = (1, 2) if direction == "backward" else (2, 1)
    remedy = "a migration v1 -> v2" if direction == "backward" else "an invertible migration v1 -> v2"
    if name in UNPROVEN:
        assert finding.counterexample is None
        verdict, example = "not provably", ""
    else:
        assert finding.counterexample is not None
        verdict, example = "not", f"; for example this v{writer} event breaks: {finding.counterexample}"
        instance = orjson.loads(finding.counterexample)
        assert instance["schema_version"] == writer
        assert Draft202012Validator(versions[writer]).is_valid(instance)
        assert not Draft202012Validator(versions[reader]).is_valid({**instance, "schema_version": reader})
    assert finding.message == (
        f"t.e@2 is {verdict} {direction}-compatible with v1 in compatibility mode {mode}: "
        f"{BREAKS[name][direction]}{example}; add {remedy}"
    )
    assert finding.file == "t.e/v2.json"
    text = orjson.dumps(versions[2], option=orjson.OPT_INDENT_2).decode()
    # the line of the first field a reason names that v2 still has, else of its properties
    fields = [f'"{field}":' for field in re.findall(r"(?:^|; )\$\.(\w+)", BREAKS[name][direction])]
    shown = next((field for field in fields if field in text), '"properties":')
    assert finding.line is not None and shown in text.splitlines()[finding.line - 1]


def test_every_incompatible_case_says_why() -> None:
    for name, _old, _new, backward, forward in CASES:
        failing = {d for d, compatible in (("backward", backward), ("forward", forward)) if not compatible}
        assert set(BREAKS.get(name, {})) == failing, name


def test_incompatibility_names_the_field_and_the_change() -> None:
    old = event_schema(1, {"a": INT}, [], CLOSED)
    new = event_schema(2, {"a": {"type": "string"}, "b": INT}, ["b"], CLOSED)
    (finding,) = release_findings({1: old, 2: new}, {1}, "backward")
    assert finding.rule == "KV204"
    assert finding.file == "t.e/v2.json"
    assert "t.e@2 is not backward-compatible with v1" in finding.message
    assert "$.a: v2 accepts only string; v1 has integer values" in finding.message
    assert "$.b: v2 requires b" in finding.message
    assert 'for example this v1 event breaks: {"event":"t.e","schema_version":1,"a":0}' in finding.message


def test_transitive_modes_compare_with_every_older_version() -> None:
    # v2 raised the minimum and was released anyway (say in compatibility mode none); v3 keeps v2's contract.
    # v3 is compatible with its predecessor, but not backward-compatible with v1: only the
    # transitive modes look that far back.
    v1 = event_schema(1, {"a": {"type": "integer", "minimum": 5}}, ["a"], CLOSED)
    v2 = event_schema(2, {"a": {"type": "integer", "minimum": 10}}, ["a"], CLOSED)
    v3 = event_schema(3, {"a": {"type": "integer", "minimum": 10, "description": "reworded"}}, ["a"], CLOSED)
    versions = {1: v1, 2: v2, 3: v3}
    for mode in ("backward", "forward", "full", "forward_transitive", "none"):
        assert release_findings(versions, {1, 2}, mode) == [], mode
    for mode in ("backward_transitive", "full_transitive"):
        (finding,) = release_findings(versions, {1, 2}, mode)
        assert finding.rule == "KV204"
        assert "t.e@3 is not backward-compatible with v1" in finding.message
        assert "lower bound raised from >= 5 (v1) to >= 10 (v3)" in finding.message


def test_released_versions_are_not_compared_again() -> None:
    old = event_schema(1, {"a": INT}, ["a"], CLOSED)
    new = event_schema(2, {"b": INT}, ["b"], CLOSED)
    assert release_findings({1: old, 2: new}, {1, 2}, "full") == []


def rename_migrations(directory: Path) -> None:
    """t.e v1 <-> v2 by renaming reserved_bytes, with one example each way."""
    (directory / "t.e").mkdir(parents=True)
    for a, b, old, new in (
        (1, 2, "reserved_bytes", "reserved_va_bytes"),
        (2, 1, "reserved_va_bytes", "reserved_bytes"),
    ):
        given = orjson.dumps({"event": "t.e", "schema_version": a, old: 4096}).decode()
        provenance = {"source_format": f"kvlog-json/v{a}", "steps": [f"t.e/v{a}-to-v{b}"]}
        expected = orjson.dumps({"event": "t.e", "schema_version": b, new: 4096, "migrated": provenance}).decode()
        (directory / "t.e" / f"v{a}-to-v{b}.toml").write_text(
            f'event = "t.e"\nfrom_version = {a}\nto_version = {b}\ninvertible = true\n'
            f'[[ops]]\nop = "rename"\nfrom = "{old}"\nto = "{new}"\n'
            f"[[examples]]\ninput = '{given}'\noutput = '{expected}'\n"
        )


@pytest.mark.parametrize("mode", MODES)
def test_the_rename_passes_once_migrations_cover_it(tmp_path: Path, mode: Mode) -> None:
    _name, old, new, backward, forward = next(case for case in CASES if case[0] == "field renamed")
    assert not backward and not forward
    versions = {1: event_schema(1, *old), 2: event_schema(2, *new)}
    rename_migrations(tmp_path / "migrations")
    chain = load_chain(tmp_path / "migrations", snapshot("now", versions).catalog)
    findings = release_findings(versions, {1}, mode, coverage(chain))
    assert [f.level for f in findings] == ["note"] * {"none": 0, "full": 2, "full_transitive": 2}.get(mode, 1)
    for finding in findings:
        assert finding.rule == "KV205"
        direction = "backward" if "backward-compatible" in finding.message else "forward"
        step = "t.e/v1-to-v2" if direction == "backward" else "t.e/v2-to-v1"
        assert f"covered by migration {step} (" in finding.message


def test_kvlog_own_v2_changes_are_breaking_and_covered_by_the_shipped_migrations() -> None:
    current = Snapshot.from_directory(data_dir("schemas"), data_dir("schemas"))
    first = {e: {1: f} for e, vs in current.versions.items() for v, f in vs.items() if v == 1}
    released = Snapshot("v1 catalog", versions=first)
    resolved_now = check_structure(current).resolved
    resolved_then = check_structure(released).resolved
    chain = load_chain(data_dir("migrations"), current.catalog)
    evolution = Evolution(current, released, resolved_now, resolved_then)
    with_v2 = sorted(event for event, versions in current.versions.items() if 2 in versions)
    assert {"kv_arena.ready", "kv_pool.allocation", "kv_pool.swa_summary"} <= set(with_v2)
    found = [f.rule for f in evolution.check("full", lambda *_: None)]
    assert len(found) >= len(with_v2) and set(found) == {"KV204"}
    covered = evolution.check("full", coverage(chain))
    assert [f.rule for f in covered] == ["KV205"] * len(found)
    messages = sorted(f.message.split(" (")[0] for f in covered)
    expected = {f"{event}@2 is not {way}-compatible with v1" for event in with_v2 for way in ("backward", "forward")}
    assert set(messages) <= expected and {message.split("@")[0] for message in messages} == set(with_v2)
    assert "mamba_pool.allocation@2 is not backward-compatible with v1" not in messages  # v2 only widens
    assert any("covered by migration kv_arena.ready/v1-to-v2 (" in f.message for f in covered)
    assert any("covered by migration kv_pool.swa_summary/v2-to-v1 (" in f.message for f in covered)


def test_removing_a_released_version_is_an_error() -> None:
    v1 = event_schema(1, {"a": INT}, ["a"], CLOSED)
    v2 = event_schema(2, {"a": INT, "b": INT}, ["a"], CLOSED)
    current = snapshot("working tree", {1: v1})
    released = snapshot("REF", {1: v1, 2: v2})
    resolved_now = check_structure(current).resolved
    resolved_then = check_structure(released).resolved
    findings = Evolution(current, released, resolved_now, resolved_then).check("backward", lambda *_: None)
    assert [(f.rule, f.message) for f in findings] == [
        ("KV203", "t.e@2 was released at REF and has been removed (t.e/v2.json)")
    ]


def test_a_new_events_first_version_has_nothing_to_be_compatible_with() -> None:
    for mode in MODES:
        assert release_findings({1: event_schema(1, {"a": INT}, ["a"], CLOSED)}, set(), mode) == [], mode


SHARED = "_defs.json"


def with_shared(label: str, number: dict[str, Any], versions: dict[int, dict[str, Any]]) -> Snapshot:
    """A catalog whose events take the definition of ``n`` from a shared file, ``_defs.json``."""
    shared = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://example.test/schemas/{SHARED}",
        "$defs": {"n": number},
    }
    files = {f"t.e/v{v}.json": orjson.dumps(doc, option=orjson.OPT_INDENT_2) for v, doc in versions.items()}
    files[SHARED] = orjson.dumps(shared, option=orjson.OPT_INDENT_2)
    return Snapshot.from_files(label, files, {rel: rel for rel in files})


def released_against(current: Snapshot, released: Snapshot) -> list[Finding]:
    structure = check_structure(current)
    assert structure.findings == []
    evolution = Evolution(current, released, structure.resolved, check_structure(released).resolved)
    return evolution.check("backward", lambda *_: None)


def test_a_released_version_changed_through_a_shared_definition_is_an_error() -> None:
    v1 = event_schema(1, {"a": {"$ref": f"../{SHARED}#/$defs/n"}}, ["a"], CLOSED)
    released = with_shared("REF", INT, {1: v1})
    (finding,) = released_against(with_shared("working tree", {**INT, "minimum": 0}, {1: v1}), released)
    assert (finding.rule, finding.file) == ("KV201", "t.e/v1.json")
    assert finding.message == (
        "t.e@1 was released at REF and must not change (through a shared definition): "
        "field a: minimum added (0); add v2 (with a migration) instead"
    )
    text = orjson.dumps(v1, option=orjson.OPT_INDENT_2).decode()
    assert finding.line is not None and '"a":' in text.splitlines()[finding.line - 1]


def test_a_released_version_reworded_is_a_warning_that_names_the_change() -> None:
    v1 = event_schema(1, {"a": INT}, ["a"], CLOSED)
    reworded = {**v1, "description": "reworded"}
    (finding,) = released_against(with_shared("working tree", INT, {1: reworded}), with_shared("REF", INT, {1: v1}))
    assert (finding.rule, finding.level, finding.file) == ("KV202", "warning", "t.e/v1.json")
    assert (
        finding.message
        == 't.e@1 was released at REF; its annotations changed: schema root: description added ("reworded")'
    )
    text = orjson.dumps(reworded, option=orjson.OPT_INDENT_2).decode()
    assert finding.line is not None and '"description":' in text.splitlines()[finding.line - 1]


def test_an_unreadable_released_version_is_not_reported_removed_and_later_ones_are_still_checked() -> None:
    v1, v2 = (event_schema(v, {"a": INT}, ["a"], CLOSED) for v in (1, 2))
    changed = event_schema(2, {"a": STR}, ["a"], CLOSED)
    files = {"t.e/v1.json": b"{ not json", "t.e/v2.json": orjson.dumps(changed, option=orjson.OPT_INDENT_2)}
    current = Snapshot.from_files("working tree", files, {rel: rel for rel in files})
    assert current.unread == {"t.e/v1.json"}
    released = snapshot("REF", {1: v1, 2: v2})
    evolution = Evolution(current, released, check_structure(current).resolved, check_structure(released).resolved)
    findings = evolution.check("backward", lambda *_: None)
    assert [(f.rule, f.file) for f in findings] == [("KV201", "t.e/v2.json")]
    assert findings[0].message.startswith("t.e@2 was released at REF and must not change: field a: ")


def test_a_rewording_points_at_the_first_annotation_that_changed() -> None:
    v1 = event_schema(1, {"a": INT}, ["a"], CLOSED)
    reworded = {**v1, "description": "reworded", "properties": {**v1["properties"], "a": {**INT, "title": "A"}}}
    current, released = with_shared("working tree", INT, {1: reworded}), with_shared("REF", INT, {1: v1})
    (finding,) = released_against(current, released)
    assert finding.message == (
        "t.e@1 was released at REF; its annotations changed: "
        'field a: title added ("A"); schema root: description added ("reworded")'
    )
    text = orjson.dumps(reworded, option=orjson.OPT_INDENT_2).decode()
    assert finding.line is not None and '"title":' in text.splitlines()[finding.line - 1]
