"""Issue 9, items 10, 11, 18: whatever a catalog holds, kvlog check reports it, quickly, and safely.

- A pattern that makes a backtracking engine take exponential time (``^(a+)+$`` against 30 characters
  took a minute in the reference validator's Python ``re``) is a KV008 finding, and the examples and
  events it rejects are still explained, by a linear-time engine.
- Broken input (a ``$ref`` typo, deep nesting, bad expectation rows, any mutation of a valid catalog)
  is a finding with a rule and a file, never a traceback.
- File names are a pull request's to choose: a newline, an escape sequence or a byte that is not
  UTF-8 in one cannot start a workflow command, rewrite a terminal or break a report format.

The rules run through ``kvlog.commands.check``, in process; report bytes and error lines are checked
on the console, where they are the contract.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import cli_harness
import pytest
from check_helpers import (
    ACME_V1,
    acme_event,
    acme_project,
    acme_rename_migrations,
    acme_schema,
    checked,
    checked_as,
    git,
    kvlog,
    read_json,
    write_json,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlog import commands
from kvlog.check.driver import CheckReport
from kvlog.check.findings import Finding
from kvlog.check.rendering import format_report
from kvlog.errors import KvlogError

SCHEMAS = Path("telemetry/schemas")
V1 = SCHEMAS / "acme.alloc" / "v1.json"
V2 = SCHEMAS / "acme.alloc" / "v2.json"
STEP = Path("telemetry/migrations/acme.alloc/v1-to-v2.toml")


def renamed_project(root: Path, extra: dict[str, Any] | None = None) -> Path:
    """The acme project with v2 (reserved_bytes renamed) and both migrations, each schema with ``extra`` fields."""
    acme_project(root)
    extra = extra or {}
    write_json(root / V1, acme_schema(1, {**ACME_V1, **extra}, ["reserved_bytes", "pool_state"]))
    renamed = {"reserved_va_bytes": ACME_V1["reserved_bytes"], "pool_state": ACME_V1["pool_state"], **extra}
    write_json(root / V2, acme_schema(2, renamed, ["reserved_va_bytes", "pool_state"]))
    acme_rename_migrations(root)
    return root


def add_to_examples(root: Path, fields: dict[str, Any]) -> None:
    """Put ``fields`` into the input and output of every example of both steps."""
    for step in (root / STEP).parent.glob("*.toml"):
        extra = json.dumps(fields)[1:-1]
        step.write_text(step.read_text().replace('"pool_state": "reserved"', f'"pool_state": "reserved", {extra}'))


# --- item 10: patterns -----------------------------------------------------------------------------

EVIL = "a" * 40 + "!"
CATASTROPHIC = [r"(a|a)*$", r"(a*)*b", r"(\w+\s?)*$", r"^(a+)+$", r"^(a|aa)+$", r"((a+)b?)+$"]


def pattern_field(place: str, pattern: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A field whose schema uses ``pattern`` at ``place``, and the example value that exercises it."""
    if place == "pattern":
        return {"label": {"type": "string", "pattern": pattern}}, {"label": EVIL}
    if place == "patternProperties":
        spec = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}, "additionalProperties": False}
        return {"labels": spec}, {"labels": {EVIL: 1}}
    spec = {"type": "object", "propertyNames": {"pattern": pattern}}
    return {"labels": spec}, {"labels": {EVIL: 1}}


@pytest.mark.parametrize("place", ["pattern", "patternProperties", "propertyNames"])
@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_backtracking_pattern_is_reported_and_its_examples_are_still_explained(
    tmp_path: Path, place: str, pattern: str
) -> None:
    spec, value = pattern_field(place, pattern)
    root = renamed_project(tmp_path / "acme", spec)
    # An example invalid for another reason too: the explanation walks every keyword, the pattern included.
    add_to_examples(root, {**value, "reserved_bytes_total": -1})
    status, findings = checked(root)  # a hang fails the run's timeout
    assert status == 1, findings
    flagged = [f for f in findings if f["rule"] == "KV008"]
    assert {f["file"] for f in flagged} == {V1.as_posix(), V2.as_posix()}, findings
    assert all(f["line"] is not None and "can backtrack exponentially" in f["message"] for f in flagged)
    explained = [f for f in findings if f["rule"] == "KV403"]
    assert explained, findings
    assert all("reserved_bytes_total: unknown field" in f["message"] for f in explained), explained


def test_a_failing_pattern_is_explained_like_any_violation(tmp_path: Path) -> None:
    root = renamed_project(tmp_path / "acme", {"label": {"type": "string", "pattern": "^(a+)+$"}})
    add_to_examples(root, {"label": EVIL})
    status, text, _ = checked_as(root, "text")
    assert status == 1
    assert f'$.label: "{EVIL}" does not match "^(a+)+$"' in text, text


@pytest.mark.parametrize(
    ("pattern", "why"),
    [(r"(a)\1", "needs a backtracking engine"), (r"(?=a)b", "needs a backtracking engine"), ("(", "not an ECMA")],
)
def test_a_pattern_the_linear_engine_cannot_run_is_reported(tmp_path: Path, pattern: str, why: str) -> None:
    root = renamed_project(tmp_path / "acme", {"label": {"type": "string", "pattern": pattern}})
    status, findings = checked(root)
    assert status == 1
    assert {f["file"] for f in findings if f["rule"] == "KV008" and why in f["message"]} == {
        V1.as_posix(),
        V2.as_posix(),
    }, findings


@pytest.mark.parametrize(
    "pattern",
    [
        "^[a-z][a-z0-9_]*$",
        r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+]00:00)$",
        "^(_[a-z]+)*$",
        "^(a+b+)+$",
        "^(a|b)*$",
        r"^\p{L}+$",
    ],
)
def test_a_linear_pattern_passes(tmp_path: Path, pattern: str) -> None:
    root = renamed_project(tmp_path / "acme", {"label": {"type": "string", "pattern": pattern}})
    assert checked(root) == (0, [])


# --- item 11: broken input is a finding ----------------------------------------------------------


def set_in_v1(root: Path, path: list[str], value: Any) -> None:
    schema = read_json(root / V1)
    node = schema
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    write_json(root / V1, schema)


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


REF = ["properties", "reserved_bytes"]
CASES = [
    ("typo in a $ref document", REF, {"$ref": "../_commn.json#/$defs/bytes"}, "KV003", "does not resolve"),
    ("$ref to a missing entry", REF, {"$ref": "../_common.json#/$defs/nope"}, "KV003", "does not resolve"),
    ("$ref into an array", REF, {"$ref": "#/required/0"}, "KV003", "points at a JSON string"),
    ("$ref #/definitions/x/0", REF, {"$ref": "#/definitions/x/0"}, "KV003", "does not resolve"),
    ("$ref #/a~2b", REF, {"$ref": "#/a~2b"}, "KV003", "does not resolve"),
    ("$ref to an absolute URL", REF, {"$ref": "https://elsewhere.example/x.json"}, "KV003", "does not resolve"),
    ("$ref that is no URI", REF, {"$ref": "http://[::1"}, "KV003", "does not resolve"),
    ("$ref cycle", ["$defs"], {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "KV003", "is recursive"),
    ("schema nested 100 deep", ["properties", "deep"], nested(100), "KV001", "levels deep"),
    ("properties not an object", ["properties"], 5, "KV002", "not a valid Draft 2020-12 schema"),
    ("enum not an array", ["properties", "pool_state", "enum"], {}, "KV002", "not a valid Draft 2020-12 schema"),
]


@pytest.mark.parametrize(("case", "path", "value", "rule", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_broken_schema_is_a_finding_not_a_traceback(
    tmp_path: Path, case: str, path: list[str], value: Any, rule: str, message: str
) -> None:
    root = renamed_project(tmp_path / "acme")  # with migrations: their examples are validated too
    set_in_v1(root, path, value)
    status, findings = checked(root)
    assert status == 1, findings
    assert any(
        f["rule"] == rule and f["file"] == V1.as_posix() and f["line"] is not None and message in f["message"]
        for f in findings
    ), findings


@pytest.mark.parametrize(
    "row",
    ['{"pass": "distractor"}', '{"line": "1", "pass": "x"}', '{"line": [1], "pass": "x"}', '{"line": 1.5}', "[1]"],
)
def test_a_bad_expectation_row_is_a_finding_at_its_line(tmp_path: Path, row: str) -> None:
    root = renamed_project(tmp_path / "acme")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "old.log").write_text("one\ntwo\n")
    (corpus / "old.expected.jsonl").write_text('{"line": 1, "pass": "distractor"}\n' + row + "\n")
    status, findings = checked(root, corpus="corpus")
    assert status == 1, findings
    assert [(f["rule"], f["file"], f["line"]) for f in findings] == [("KV503", "corpus/old.expected.jsonl", 2)]


# A hypothesis fuzz: mutate a valid catalog anywhere, at any JSON type, and run the real command.

TEXT = st.characters(blacklist_categories=("Cs",))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(TEXT, max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(TEXT, max_size=6), inner, max_size=3),
    max_leaves=6,
)
REFS = st.sampled_from(
    [
        "x.json",
        "../_common.json#/$defs/bytes/0",
        "#/definitions/x/0",
        "#/a~2b",
        "#/%24defs/x",
        "https://acme.example/telemetry/nowhere.json",
        "http://[::1",
        "#",
        "#/properties",
        "../_commn.json#/$defs/bytes",
        "",
    ]
)
VALUES = JSON | REFS.map(lambda ref: {"$ref": ref}) | st.sampled_from([40, 100, 300]).map(nested)
DEPTHS = st.sampled_from([100, 1000, 1025, 5000, 10000])


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (an array, an inline table, a number...), so every TOML type is tried."""
    if value is None:
        return '""'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value) if value == value and abs(value) != float("inf") else "0"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def nodes(document: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``document`` a value can be put."""
    places = [path]
    if isinstance(document, dict):
        for key, value in document.items():
            places += nodes(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            places += nodes(value, (*path, index))
    return places


def replace(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_mutation_of_a_catalog_is_checked_without_a_traceback(tmp_path: Path, data: st.DataObject) -> None:
    root = renamed_project(Path(tempfile.mkdtemp(dir=tmp_path)) / "acme")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "old.log").write_text("one\n")
    (corpus / "old.expected.jsonl").write_text('{"line": 1, "pass": "distractor"}\n')
    target = data.draw(st.sampled_from([V1, V2, SCHEMAS / "_common.json", STEP, corpus / "old.expected.jsonl"]))
    path = root / target
    how = data.draw(st.sampled_from(["value", "text", "truncate", "deep"]))
    if how == "deep":
        depth = data.draw(DEPTHS)
        if path.suffix == ".toml":
            path.write_text(path.read_text() + "deep = " + "[" * depth + "]" * depth + "\n")
        else:
            path.write_text('{"$id": "x", "properties": ' * depth + "{}" + "}" * depth + "\n")
    elif how == "text":
        path.write_text(data.draw(st.text(TEXT, max_size=40)))
    elif how == "truncate":
        text = path.read_text()
        path.write_text(text[: data.draw(st.integers(0, len(text)))])
    elif path.suffix == ".json":
        document = read_json(path)
        write_json(path, replace(document, data.draw(st.sampled_from(nodes(document))), data.draw(VALUES)))
    elif path.suffix == ".toml":
        text = path.read_text()
        drawn = data.draw(VALUES)
        value = data.draw(st.sampled_from([f"'{json.dumps(drawn)}'", toml_value(drawn)]))
        key = data.draw(st.sampled_from(["event", "from_version", "to_version", "invertible", "input", "output", "op"]))
        path.write_text(re.sub(rf"^{key} = .*$", lambda _m: f"{key} = {value}", text, count=1, flags=re.M))
    else:
        path.write_text(json.dumps(data.draw(VALUES)) + "\n")
    try:
        outcome = commands.check(root, corpus=corpus)
    except KvlogError:  # exit 2: the input cannot be checked at all
        return
    assert outcome.exit_status in {0, 1}
    findings = json.loads(format_report(outcome.report, "json"))
    assert all(f["rule"] and f["file"] for f in findings), findings


# --- item 18: file names are escaped in every format ---------------------------------------------

NAMES = [b"evil\n::error file=x::planted.json", b"cr\rhere.json", b"esc\x1b[31mred.json", b"bad\xff\xfe.json"]
FORMATS = ["text", "github", "junit", "json"]


def plant_names(root: Path) -> None:
    directory = os.fsencode(root / SCHEMAS / "acme.alloc")
    for name in NAMES:
        Path(os.fsdecode(os.path.join(directory, name))).write_text("{}")


def run_bytes(root: Path, *args: str) -> tuple[int, bytes]:
    """``kvlog ARGS...`` in ``root``, in this process: (exit status, standard output as bytes)."""
    done = cli_harness.kvlog(*args, cwd=root)
    assert b"Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def assert_safe(output: bytes) -> str:
    text = output.decode("utf-8")  # valid UTF-8: a byte that is not was escaped
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), text
    return text


@pytest.mark.parametrize("output_format", FORMATS)
def test_file_names_with_controls_are_escaped(tmp_path: Path, output_format: str) -> None:
    root = acme_project(tmp_path / "acme")
    plant_names(root)
    status, output = run_bytes(root, "check", "--format", output_format)
    assert status == 1
    text = assert_safe(output)
    lines = text.splitlines()
    if output_format == "text":
        assert len(lines) == len(NAMES)
        assert all(re.match(r"^telemetry/schemas/acme\.alloc/\S.*: KV007 error: ", line) for line in lines), lines
        assert "evil\\n::error file=x::planted.json" in text
        assert "esc\\x1b[31mred.json" in text and "bad\\xff\\xfe.json" in text
    elif output_format == "github":
        assert len(lines) == len(NAMES)
        assert all(line.startswith("::error file=telemetry/schemas/acme.alloc/") for line in lines), lines
        assert "file=telemetry/schemas/acme.alloc/evil%0A%3A%3Aerror file=x%3A%3Aplanted.json," in text
        assert "cr%0Dhere.json" in text
    elif output_format == "junit":
        suite = ElementTree.fromstring(text)
        failure = suite.find("testcase[@name='KV007 stray-file']/failure")
        assert failure is not None and "esc\\x1b[31mred.json" in (failure.text or "")
    else:
        files = sorted(f["file"] for f in json.loads(text))
        assert files == sorted(
            f"telemetry/schemas/acme.alloc/{n}"
            for n in [
                "bad\\xff\\xfe.json",
                "cr\\rhere.json",
                "esc\\x1b[31mred.json",
                "evil\\n::error file=x::planted.json",
            ]
        )


def test_a_name_that_is_not_utf8_at_the_ref_is_read(tmp_path: Path) -> None:
    root = acme_project(tmp_path / "acme")
    plant_names(root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "--", "pyproject.toml", "telemetry")
    git(root, "commit", "-q", "-m", "names")
    status, output = run_bytes(root, "check", "--against", "HEAD")
    assert status == 1
    assert "bad\\xff\\xfe.json: KV007 error" in assert_safe(output)


def test_an_error_line_naming_a_path_stays_one_line(tmp_path: Path) -> None:
    done = kvlog("check", "no\nsuch\x1bdir", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "kvlog check: no\\nsuch\\x1bdir: not a directory\n", done.stderr


@pytest.mark.parametrize("breakage", ["nested 100 deep", "invalid JSON", "a link to /dev/zero"])
def test_a_released_version_made_unreadable_is_reported_once_not_as_removed(tmp_path: Path, breakage: str) -> None:
    root = acme_project(tmp_path / "acme")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "--", "pyproject.toml", "telemetry")
    git(root, "commit", "-q", "-m", "v1")
    if breakage == "nested 100 deep":
        set_in_v1(root, ["properties", "deep"], nested(100))
    elif breakage == "invalid JSON":
        (root / V1).write_text("{")
    else:
        (root / V1).unlink()
        (root / V1).symlink_to("/dev/zero")
    status, findings = checked(root, against="HEAD")
    assert status == 1, findings
    assert [(f["rule"], f["file"]) for f in findings] == [("KV001", V1.as_posix())], findings


@pytest.mark.parametrize("depth", [100, 255, 1000, 1025, 5000])
def test_a_deeply_nested_event_in_a_golden_log_is_a_finding(tmp_path: Path, depth: int) -> None:
    root = acme_project(tmp_path / "acme")
    corpus = root / "corpus"
    corpus.mkdir()
    deep = "[" * depth + "]" * depth
    line = acme_event(1, reserved_bytes=1, pool_state="reserved")[:-1] + f', "migrated": {{"x": {deep}}}}}'
    (corpus / "old.log").write_text(f"plain text\n{line}\n")
    status, findings = checked(root, corpus="corpus")
    if depth <= 254:  # what orjson writes back: such an event is valid (migrated is any object)
        assert (status, findings) == (0, []), findings
        return
    assert status == 1, findings
    assert findings and all(f["rule"].startswith("KV50") and f["file"] == "corpus/old.log" for f in findings), findings


def test_the_linear_validator_answers_for_an_event_too_deep_for_it() -> None:
    from kvlog.check.linear_validator import CheckValidator  # noqa: PLC0415
    from kvlog.schema.catalog import default_catalog  # noqa: PLC0415

    deep: Any = []
    for _ in range(1000):
        deep = [deep]
    event = {"event": "kv_arena.closed", "schema_version": 1, "ext": {"x": deep}}
    validator = CheckValidator(default_catalog())
    assert not validator.is_valid(event)
    assert [v.path for v in validator.violations(event)] == ["$"]
    assert "cannot be validated" in validator.violations(event)[0].message


# The rules after the structure rules see any valid Draft 2020-12 schema: compatibility and naming
# must answer for every shape one can take, not only the shapes kvlog's own catalog has.

NUMBERS = st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | NUMBERS | st.text(max_size=3)
TYPES = ["null", "boolean", "object", "array", "number", "integer", "string"]
FIELD_NAMES = st.sampled_from(["a", "b", "c_bytes", "pool_state"])


def schema_shapes(depth: int) -> st.SearchStrategy[Any]:
    sub = st.booleans() | st.just({}) if depth == 0 else schema_shapes(depth - 1)
    keywords = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
            "enum": st.lists(SCALARS | st.lists(SCALARS, max_size=2), max_size=3),
            "const": SCALARS,
            "minimum": NUMBERS,
            "maximum": NUMBERS,
            "exclusiveMinimum": NUMBERS,
            "multipleOf": NUMBERS.filter(lambda x: x > 0),
            "maxLength": st.integers(0, 5),
            "pattern": st.sampled_from(["a", "(", "^(a+)+$"]),
            "items": sub,
            "prefixItems": st.lists(sub, max_size=2),
            "minItems": st.integers(0, 3),
            "uniqueItems": st.booleans(),
            "properties": st.dictionaries(FIELD_NAMES, sub, max_size=3),
            "required": st.lists(FIELD_NAMES, unique=True, max_size=3),
            "additionalProperties": sub,
            "patternProperties": st.dictionaries(st.sampled_from(["^a", "(a*)*"]), sub, max_size=1),
            "allOf": st.lists(sub, min_size=1, max_size=2),
            "anyOf": st.lists(sub, min_size=1, max_size=2),
            "oneOf": st.lists(sub, min_size=1, max_size=2),
            "not": sub,
            "if": sub,
            "then": sub,
        },
    )
    return st.booleans() | keywords


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_compatibility_and_naming_answer_for_any_valid_schema(data: st.DataObject) -> None:
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    from kvlog.check.evolution import comparable  # noqa: PLC0415
    from kvlog.check.instances import candidates  # noqa: PLC0415
    from kvlog.check.naming import _integer_problem, _is_enumerated  # noqa: PLC0415
    from kvlog.check.verdict import compare  # noqa: PLC0415

    valid = schema_shapes(1).filter(Draft202012Validator(Draft202012Validator.META_SCHEMA).is_valid)
    old, new = data.draw(valid), data.draw(valid)
    verdict = compare(comparable(old), comparable(new), mode="full")
    assert verdict.compatible is True or all(str(reason) for reason in verdict.reasons)
    if verdict.compatible is False:  # the counterexample is proven by the reference validator
        writer, reader = (old, new) if verdict.direction == "backward" else (new, old)
        instance = verdict.counterexample
        assert _valid_in_reference(writer, instance) is not False and _valid_in_reference(reader, instance) is not True
    if verdict.compatible is True:  # sound: no instance of either side that the other rejects
        for writer, reader in ((old, new), (new, old)):
            for instance in [*candidates(writer), None, 0, 0.5, "", "a", [], {}, {"a": 0}, [0], True]:
                if _valid_in_reference(writer, instance) is True:
                    assert _valid_in_reference(reader, instance) is not False, (writer, reader, instance)
    _integer_problem(new, signed=False)
    _is_enumerated(new)


def _valid_in_reference(schema: Any, instance: Any) -> bool | None:
    """The reference validator's answer; None when it cannot give one (a pattern ``re`` refuses, an overflow)."""
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    try:
        return bool(Draft202012Validator(schema).is_valid(instance))
    except Exception:  # noqa: BLE001 - no answer is neither a witness nor a counter-witness
        return None


@pytest.mark.parametrize("output_format", ["text", "github"])
def test_a_file_name_that_is_a_workflow_command_never_starts_a_line(output_format: str) -> None:
    """A catalog whose schemas sit at the project's root can hold a file named ``::error::...``."""
    report = CheckReport(findings=[Finding("KV007", "stray file", "::error file=x::planted.json")])
    text = format_report(report, output_format)  # type: ignore[arg-type]
    assert not any(line.startswith("::error file=x") for line in text.splitlines()), text
    assert "./::error file=x::planted.json" in text or "./%3A%3Aerror file=x%3A%3Aplanted.json" in text, text
