"""``kvlog validate``'s native path (``kvlog._native.EventDecoders``) reaches the Python path's verdicts.

The native validator accepts a line only where the Python path would count it a valid event; every
other line goes to the Python path, which alone words findings, so ``kvlog validate`` must write the
same bytes and exit with the same status whichever runs. Held here: on every log and event file the
repository holds (golden migrations, the wild corpus migrated, examples, a sample of every event
version), and on fuzzed lines made from valid events (wrong types, bounds, extra and missing keys,
duplicate keys, odd numbers, escapes, surrogates, whitespace, BOMs, depth), line by line and as files.
The decoder table it reads is checked against a fresh generation from ``schemas/``, and the patterns
it compiles against the compiled validator's matching.

The native tests skip where the module is not built, unless ``KVLOG_NATIVE=1`` says it must be (CI).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema_rs
import orjson
import pytest
from cli_harness import kvlog
from foundation_samples import sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlog import native
from kvlog.file_validation import Counts, native_decoders, validate_lines
from kvlog.schema import decoders
from kvlog.schema.catalog import Catalog, default_catalog
from kvlog.schema.event_validator import EventValidator

if TYPE_CHECKING:
    from kvlog._native import EventDecoders

ROOT = Path(__file__).resolve().parent.parent
CATALOG = default_catalog()
VALIDATOR = EventValidator()
_DRAFT = "https://json-schema.org/draft/2020-12/schema"

built = pytest.mark.skipif(
    native.compiled() is None and os.environ.get(native.ENV) != "1",
    reason="kvlog._native is not built (scripts/native builds it where cargo is installed): only the Python "
    "validator runs here, so there is nothing to compare it with",
)


def test_the_committed_table_is_a_fresh_generation() -> None:
    assert decoders.PATH.read_text() == decoders.render(CATALOG), (
        "schemas changed: run `python -m kvlog.schema.codegen` and commit kvlog/schema/decoders.json"
    )


def test_every_shipped_event_version_is_decided_natively() -> None:
    """An undecided event would run at the Python path's speed without a word: the shipped catalog has none."""
    undecided = [entry for entry in decoders.table(CATALOG)["events"] if entry[2] is None]
    assert not undecided


def test_a_catalog_other_than_the_committed_one_gets_its_own_table(tmp_path: Path) -> None:
    catalog = _one_event_catalog({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    assert orjson.loads(decoders.for_catalog(catalog))["catalog"] == decoders.catalog_digest(catalog)
    assert decoders.for_catalog(CATALOG) == decoders.PATH.read_bytes()


def _one_event_catalog(schema: dict[str, Any]) -> Catalog:
    document = {"$schema": _DRAFT, "$id": "https://kvlog.dev/schemas/t.e/v1.json", **schema}
    return Catalog(schemas={"t.e": {1: document}})


@pytest.mark.parametrize(
    ("subschema", "reason"),
    [
        ({"multipleOf": 2}, "multipleOf"),
        ({"minimum": 0.5}, "minimum"),
        ({"const": 1.5}, "const or enum"),
        ({"enum": [[1]]}, "const or enum"),
        ({"patternProperties": {"a": True}}, "patternProperties"),
        ({"type": "int"}, "type"),
        ({"pattern": "^[0-9]\\d$"}, "escape"),
        ({"pattern": "a.b"}, "'.'"),
        ({"pattern": "(?=a)"}, "group with ?"),
        ({"pattern": "^a|b$"}, "anchor beside"),
        ({"pattern": "a{1,99}"}, "repeat count"),
        ({"pattern": "a**"}, "repeat of a repeat"),
    ],
)
def test_what_the_table_cannot_hold_leaves_the_event_undecided(subschema: dict[str, Any], reason: str) -> None:
    [entry] = decoders.table(_one_event_catalog({"type": "object", "properties": {"x": subschema}}))["events"]
    assert entry[2] is None
    assert reason in entry[3]


@pytest.mark.parametrize(
    ("branches", "folded"),
    [
        ([{"type": "integer", "minimum": 0}, {"type": "null"}], True),
        ([{"type": "string", "minLength": 1}, {"type": "integer", "maximum": 3}], True),
        ([{"type": "integer", "minimum": 0}, {"type": "number", "maximum": 5}], False),  # -1 is a number
        ([{"type": "integer", "minimum": 0}, {"type": "null", "const": None}], False),
        ([{"type": "string", "minimum": 0}, {"type": "null"}], False),
        ([{"minimum": 0}, {"type": "null"}], False),
    ],
)
def test_an_any_of_folds_into_one_node_only_where_that_is_exact(branches: list[Any], folded: bool) -> None:
    data = decoders.table(_one_event_catalog({"type": "object", "properties": {"x": {"anyOf": branches}}}))
    [property_node] = [data["nodes"][index] for _, index, _ in data["nodes"][data["events"][0][2]]["keys"]]
    assert ("anyOf" not in property_node) == folded


def _run(automaton: dict[str, Any], text: str) -> bool:
    """The DFA as ``native/src/validate.rs`` runs it."""
    states, state = automaton["states"], 0
    if not automaton["anchored"] and states[0][0]:
        return True
    for char in text:
        moves = [step for low, high, step in states[state][1] if low <= ord(char) <= high]
        if not moves:
            return False
        state = moves[0]
        if not automaton["anchored"] and states[state][0]:
            return True
    return bool(states[state][0])


_PATTERNS = [
    *sorted({pattern["pattern"] for pattern in decoders.table(CATALOG)["patterns"]}),
    "ab*c",
    "^[^a-c]+$",
    "(x|yz){2,3}$",
    "^(?:a|b)?c{0,2}$",
    "[-a]z",
    "^\\.[+]?$",
    "^[a-c-]*$",
    "x{2,}",
    "^(a|ab)(c|bcd)$",
]


@pytest.mark.parametrize("pattern", _PATTERNS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_patterns_compile_to_what_the_compiled_validator_matches(pattern: str, data: st.DataObject) -> None:
    automaton = decoders.compile_pattern(pattern)
    alphabet = sorted({*(c for c in pattern if c not in "^$\\"), "0", "9", "Z", "é", "\n", "\U0001f600", "a"})
    text = data.draw(st.text(alphabet=alphabet, max_size=36) | st.just("2026-12-02T09:00:00.123456Z"))
    expected = jsonschema_rs.validator_for({"$schema": _DRAFT, "pattern": pattern}).is_valid(text)
    assert _run(automaton, text) == expected, (pattern, text)


def _python_accepts(line: bytes) -> bool:
    counts = Counts()
    findings = list(validate_lines("-", [line], counts, VALIDATOR))
    return not findings and counts.events == 1 and counts.invalid_events == 0 and counts.skipped_lines == 0


@cache
def _compiled() -> EventDecoders:
    """The native validator whatever ``KVLOG_NATIVE`` says (CI runs these tests with it at 0 too)."""
    module = native.compiled()
    assert module is not None, f"kvlog._native is not built, and {native.ENV}=1 says it must be"
    built: EventDecoders = module.EventDecoders(decoders.for_catalog(CATALOG))
    return built


def test_the_run_builds_its_native_validator_only_where_selected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV, "0")
    assert native_decoders(CATALOG) is None
    monkeypatch.setenv(native.ENV, "1")
    assert (native_decoders(CATALOG) is None) == (native.compiled() is None)


def _native_accepts(line: bytes) -> bool:
    compiled = _compiled()
    count, rejected = compiled.rejected(line, 0, len(line), 16 << 20)
    assert count == (line.count(b"\n") + (not line.endswith(b"\n")) if line else 0)
    return not rejected


SAMPLES = [orjson.dumps(sample(event, version)) for event in CATALOG.events() for version in CATALOG.versions(event)]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every log and event file to validate both ways: the repository's, the wild corpus migrated, the samples."""
    where = tmp_path_factory.mktemp("corpora")
    files = {
        str(path.relative_to(ROOT)): path
        for pattern in ("tests/corpus/*", "tests/wild/*/*.log", "examples/*.log")
        for path in sorted(ROOT.glob(pattern))
        if path.suffix in {".log", ".jsonl"}
    }
    for source, pattern in (("wild", "tests/wild/*/*.log"), ("golden", "tests/corpus/*.log")):
        migrated = where / f"{source}-migrated.jsonl"
        done = kvlog("migrate", "--only-events", *sorted(ROOT.glob(pattern)))
        assert done.returncode in {0, 1}, done.stderr
        migrated.write_bytes(done.stdout)
        files[f"{source} corpus, migrated"] = migrated
    (where / "samples.jsonl").write_bytes(b"\n".join(SAMPLES) + b"\n")
    files["a sample of every event version"] = where / "samples.jsonl"
    return files


def _validate_both_ways(*args: str | Path) -> None:
    python = kvlog("validate", *args, env={**os.environ, native.ENV: "0"})
    compiled = kvlog("validate", *args, env={**os.environ, native.ENV: "1"})
    assert (compiled.returncode, compiled.stdout, compiled.stderr) == (python.returncode, python.stdout, python.stderr)


@built
def test_every_corpus_validates_byte_identically_on_both_paths(corpora: dict[str, Path]) -> None:
    for name, path in corpora.items():
        for options in ([], ["--skip-non-json"], ["--skip-unknown-events", "--skip-non-json"]):
            try:
                _validate_both_ways(*options, path)
            except AssertionError as exc:
                raise AssertionError(f"{name} {options}: the two paths differ") from exc


@built
def test_native_accepts_every_valid_event_of_the_corpora(corpora: dict[str, Path]) -> None:
    """Accepting nothing would be sound too, and as slow as the Python path: the events kvlog writes are all taken."""
    for name, path in corpora.items():
        for line in path.read_bytes().splitlines(keepends=True):
            assert _native_accepts(line) == _python_accepts(line), (name, line)


# Fuzzed lines: a valid sample, then one mutation of its value or of its text.
_ODD_VALUES = [
    None, True, False, 0, -1, 1, 1.0, -0.0, 0.5, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, "", "x", "info", [], [1], {},
    {"tp": 0}, {"TP": 0}, {"tp": -1}, {"tp": 1.0}, {"é": 0}, "2026-12-02T09:00:00Z", "2026-12-02T09:00:00Z\n",
    "2026-12-02T09:00:00.1234567890Z", "2026-12-02T09:00:00+00:00", "２026-12-02T09:00:00Z", "mha", "mla", "commit",
]  # fmt: skip
_TEXT_EDITS: list[tuple[bytes, bytes]] = [
    (b"{", b"\xef\xbb\xbf{"),
    (b"{", b" \t{"),
    (b":", b" : "),
    (b",", b" ,\r\n"),
    (b'"info"', b'"\\u0069nfo"'),
    (b'"level"', b'"\\u006cevel"'),
    (b'"level":"info"', b'"level":"info","level":"info"'),
    (b'"level":"info"', b'"level":"warning","level":"info"'),
    (b'"pid":4242', b'"pid":4242.0'),
    (b'"pid":4242', b'"pid":4.242e3'),
    (b'"pid":4242', b'"pid":-0'),
    (b'"pid":4242', b'"pid":04242'),
    (b'"pid":4242', b'"pid":NaN'),
    (b'"pid":4242', b'"pid":1e400'),
    (b'"pid":4242', b'"pid":18446744073709551616'),
    (b'"tp":0', b'"tp":0,"tp":1'),
    (b'"tp":0', b'"tp":0,"t\\u0070":1'),
    (b'"info"', b'"\\ud800"'),
    (b'"info"', b'"\\udc00"'),
    (b'"info"', b'"\\ud83d\\ude00"'),
    (b'"info"', b'"inf\x7fo"'),
    (b'"info"', b'"inf\x01o"'),
    (b'"info"', b'"inf\xc3o"'),
    (b'"schema_version":1', b'"schema_version":1.0'),
    (b'"schema_version":1', b'"schema_version":true'),
    (b"}", b"} "),
    (b"}", b"}x"),
    (b"}", b"}\r"),
    (b"}", b"}\n\n"),
    (b'"ranks":{', b'"ext":' + b"[" * 300 + b"]" * 300 + b',"ranks":{'),
    (b'"ranks":{', b'"ext":{"a":{"a":1,"a":2}},"ranks":{'),
]


@st.composite
def fuzzed_lines(draw: st.DrawFn) -> bytes:
    event = dict(json.loads(draw(st.sampled_from(SAMPLES))))
    mutation = draw(st.sampled_from(["value", "drop", "add", "text", "none"]))
    if mutation == "value":
        event[draw(st.sampled_from(sorted(event)))] = draw(st.sampled_from(_ODD_VALUES))
    elif mutation == "drop":
        del event[draw(st.sampled_from(sorted(event)))]
    elif mutation == "add":
        event[draw(st.sampled_from(["extra", "ext", "migrated", "ranks", "Level"]))] = draw(
            st.sampled_from(_ODD_VALUES)
        )
    line = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"  # 2**64 too
    if mutation == "text":
        old, new = draw(st.sampled_from(_TEXT_EDITS))
        line = line.replace(old, new, 1)
    return line


@built
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzzed_lines())
def test_native_accepts_a_fuzzed_line_only_where_python_does(line: bytes) -> None:
    if _native_accepts(line):
        assert _python_accepts(line), line


@built
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(fuzzed_lines() | st.sampled_from([b"\n", b"text\n", b"[1]\n", b"{}\n"]), max_size=40), st.booleans())
def test_a_file_of_fuzzed_lines_validates_byte_identically(tmp_path: Path, lines: list[bytes], cut: bool) -> None:
    path = tmp_path / "fuzzed.jsonl"
    data = b"".join(lines)
    path.write_bytes(data[:-1] if cut and data.endswith(b"\n") else data)  # the last line without its newline too
    _validate_both_ways(path)


@built
def test_lines_over_the_cap_are_left_to_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line over ``MAX_LINE_BYTES`` is rejected natively, and reported as the Python path reports it."""
    from kvlog import file_validation  # noqa: PLC0415 - its cap is what the native path is given
    from kvlog.io import inputs  # noqa: PLC0415

    line = SAMPLES[0] + b"\n"
    monkeypatch.setattr(file_validation, "MAX_LINE_BYTES", len(line) - 1)
    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", len(line) - 1)
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"{}\n" + line * 3)
    _validate_both_ways(path)
