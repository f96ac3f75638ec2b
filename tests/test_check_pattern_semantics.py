"""A ``pattern`` is matched as Draft 2020-12 says (ECMA-262), and no invalid event goes unexplained.

In ECMA-262 ``$`` matches only at the end of the string; in Python's ``re``, which the reference
engine (jsonschema) uses, it also matches before a final newline. So a timestamp ending in ``\\n``
was invalid to the compiled engine and fine to the reference one: ``kvlog validate`` counted the
event invalid, printed no finding and exited 0, and ``migrate`` refused it with an empty reason.
The reference engine now matches patterns with ECMA-262 semantics, and wherever the two engines
still disagree (a user's schema with ``patternProperties``) the event gets a finding of its own.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog_text
from foundation_samples import sample

from kvlog.file_validation import Counts, validate_lines
from kvlog.schema.catalog import SCHEMA_BASE_URI, Catalog, default_catalog
from kvlog.schema.event_validator import EventValidator, Violation

CATALOG = default_catalog()
EVENT_VERSIONS = [(event, version) for event in CATALOG.events() for version in CATALOG.versions(event)]
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def _at_the_ends(event: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The event with a newline before or after each string the envelope's patterns judge."""
    out = []
    for where, text in (("after", "{}\n"), ("before", "\n{}")):
        out.append(("$.timestamp", where, {**event, "timestamp": text.format(event["timestamp"])}))
        out.append(("$.ranks", where, {**event, "ranks": {text.format("tp"): 0}}))
    return out


@pytest.mark.parametrize(("event", "version"), EVENT_VERSIONS)
def test_a_newline_at_either_end_breaks_an_anchored_pattern_for_both_engines(event: str, version: int) -> None:
    validator = EventValidator()
    good = {**sample(event, version), "ranks": {"tp": 0}}
    assert validator.is_valid(good)
    for path, where, bad in _at_the_ends(good):
        assert not validator.is_valid(bad), (path, where)
        found = validator.violations(bad)
        assert [v.path for v in found] == [path], (where, found)
        assert "does not match" in found[0].message


def test_kvlog_validate_reports_the_timestamp_ending_in_a_newline_and_fails(tmp_path: Path) -> None:
    event = {**sample("kv_arena.closed", 1), "timestamp": "2026-12-05T10:00:00Z\n"}
    log = tmp_path / "events.jsonl"
    log.write_bytes(orjson.dumps(event) + b"\n")
    result = kvlog_text("validate", log)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout.startswith(f"{log}:1: kv_arena.closed@1: $.timestamp: ")
    assert "1 invalid" in result.stderr
    assert "1 problems" in result.stderr


def _catalog_with_pattern_properties(tmp_path: Path) -> Catalog:
    """A user's event whose extra fields are named by ``patternProperties``: the engines read keys differently."""
    directory = tmp_path / "my.tagged"
    directory.mkdir()
    schema = copy.deepcopy(dict(CATALOG.schema("kv_memory.pool_end", 1)))
    schema["$id"] = SCHEMA_BASE_URI + "my.tagged/v1.json"
    schema["properties"]["event"] = {"const": "my.tagged"}
    schema["patternProperties"] = {"^x_[a-z]+$": {"type": "integer"}}
    (directory / "v1.json").write_text(json.dumps(schema))
    return Catalog.load([SCHEMAS, tmp_path])


def test_an_event_the_engines_disagree_on_is_still_explained_and_counted(tmp_path: Path) -> None:
    validator = EventValidator(_catalog_with_pattern_properties(tmp_path))
    event = {**sample("kv_memory.pool_end", 1), "event": "my.tagged"}
    assert validator.is_valid({**event, "x_gpu": 3})
    bad = {**event, "x_gpu\n": 3}  # Python's re takes it for x_gpu; ECMA-262 makes it an unknown field
    assert not validator.is_valid(bad)
    found = validator.violations(bad)
    unexplained = "rejected by the compiled validator (jsonschema-rs); the reference one finds no reason"
    assert found == [Violation("$", unexplained)]
    summary = Counts()
    problems = list(validate_lines("f", [orjson.dumps(bad)], summary, validator))
    assert [p.violation for p in problems] == found
    assert (summary.invalid_events, summary.findings, summary.ok) == (1, len(found), False)


def test_a_run_that_counted_an_invalid_event_is_never_ok() -> None:
    assert not Counts(events=1, invalid_events=1).ok
    assert Counts(events=1).ok
