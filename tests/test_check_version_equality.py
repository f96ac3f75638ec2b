"""Versions Python finds equal are judged as JSON Schema judges them, whatever came first.

``1``, ``1.0`` and ``true`` are one key in a Python dict (``True == 1 == 1.0``, equal hashes), and
every hot loop keeps its compiled checks in such dicts, keyed by the ``schema_version`` it read.
When the check kept under that key was whichever of them came first, one event written with
``"schema_version": true`` made every later valid event of its name invalid: ``kvlog validate``
counted them invalid and failed, and a server in ``warn`` mode replaced each of them with a
violation report for the rest of its life. JSON Schema says: the schema's ``"const": 1`` accepts
``1.0`` (numbers compare by value) and refuses ``true`` (not a number), so ``1.0`` is version 1
everywhere (``validate``, ``migrate``, emission) and ``true`` no version at all.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog_text
from hypothesis import given, settings
from hypothesis import strategies as st
from migration_helpers import READY_V1

import kvlog
from kvlog import commands, events
from kvlog.check.linear_validator import CheckValidator
from kvlog.file_validation import Counts, validate_lines
from kvlog.schema.catalog import catalog_version, default_catalog
from kvlog.schema.event_validator import EventValidator

CLOSED: dict[str, Any] = {
    "event": "kv_arena.closed",
    "schema_version": 1,
    "timestamp": "2026-12-05T10:00:00Z",
    "level": "info",
    "arena_id": "1_0",
    "released_bytes": 5,
}
#: every JSON value a line may hold as its version, with whether kv_arena.closed@1's schema then accepts it
VERSIONS: dict[str, tuple[object, bool]] = {
    "1": (1, True),
    "1.0": (1.0, True),
    "true": (True, False),
    "false": (False, False),
    "0": (0, False),
    "0.0": (0.0, False),
    "2": (2, False),
    "2.0": (2.0, False),
    "1.5": (1.5, False),
    "string": ("1", False),
    "null": (None, False),
}


def line(version: object) -> bytes:
    return orjson.dumps({**CLOSED, "schema_version": version})


def test_the_version_a_schema_version_value_names_is_its_number_and_never_a_boolean() -> None:
    named = [catalog_version(value) for value, _ in VERSIONS.values()]
    assert named == [1, 1, None, None, 0, 0, 2, 2, None, None, None]


@pytest.mark.parametrize("validator_class", [EventValidator, CheckValidator])
def test_versions_python_finds_equal_share_a_check_the_schema_decides(validator_class: type[EventValidator]) -> None:
    validator = validator_class(default_catalog())
    for order in ((True, 1, 1.0), (1.0, True, 1), (1, 1.0, True)):
        fresh = validator_class(default_catalog())
        checks = {fresh.fast_check("kv_arena.closed", version) for version in order}
        assert len(checks) == 1, order
    for name, (version, valid) in VERSIONS.items():
        event = {**CLOSED, "schema_version": version}
        assert validator.is_valid(event) is valid, name
        assert (not validator.violations(event)) is valid, name


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(sorted(VERSIONS)), min_size=1, max_size=12))
def test_validate_judges_each_line_alone_whatever_came_before(names: list[str]) -> None:
    data = [line(VERSIONS[name][0]) for name in names]
    summary = Counts()
    reported = {problem.line for problem in validate_lines("f", data, summary, EventValidator())}
    invalid = {number for number, name in enumerate(names, 1) if not VERSIONS[name][1]}
    assert reported == invalid
    assert summary.invalid_events == len(invalid)
    assert summary.events == len(names)


def test_kvlog_validate_passes_a_valid_event_after_one_whose_version_is_true(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(line(True) + b"\n" + line(1) + b"\n" + line(1.0) + b"\n")
    result = kvlog_text("validate", log)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0].startswith(
        f"{log}:1: kv_arena.closed@true: $.schema_version: unknown version true"
    )
    assert len(result.stdout.splitlines()) == 1
    assert "3 events, 1 invalid" in result.stderr


@pytest.mark.parametrize("bad", [True, False, 1.5, "1", None, 0])
def test_an_emitted_event_with_a_wrong_version_does_not_sink_the_valid_events_after_it(bad: object) -> None:
    stream = io.BytesIO()
    kvlog.configure(output="json", validation="warn", stream=stream)
    logger = kvlog.get_logger()
    fields = {key: CLOSED[key] for key in ("arena_id", "released_bytes")}
    logger.info("kv_arena.closed", schema_version=bad, **fields)
    logger.info("kv_arena.closed", **fields)
    logger.info("kv_arena.closed", schema_version=1.0, **fields)
    kvlog.emit(events.KvArenaClosed(arena_id="1_0", released_bytes=5))
    written = [orjson.loads(text) for text in stream.getvalue().splitlines()]
    assert [event["event"] for event in written] == ["kvlog.schema_violation"] + ["kv_arena.closed"] * 3
    assert written[0]["violating_schema_version"] == catalog_version(bad)


def test_migrate_takes_a_version_written_as_1_0_for_version_1_and_true_for_none(tmp_path: Path) -> None:
    ready = {key: value for key, value in READY_V1.items() if key != "schema_version"}
    lines = [orjson.dumps({"schema_version": version, **ready}) for version in (True, 1.0, 1)]
    log = tmp_path / "old.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    out = io.BytesIO()
    outcome = commands.migrate(str(log), stdout=out)
    written = out.getvalue().splitlines()
    assert written[0] == lines[0]  # not a catalog event: copied as it is
    upgraded = [orjson.loads(text) for text in written[1:]]
    assert [event["schema_version"] for event in upgraded] == [2, 2]
    assert [event["migrated"]["source_format"] for event in upgraded] == ["kvlog-json/v1"] * 2
    assert outcome.report.events == 2
