"""One envelope: live and migrated events are written in one key order, the one the schemas declare."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
import structlog

import kvlog
from kvlog import envelope, events
from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.schema.catalog import default_catalog

CATALOG = default_catalog()
SCHEMAS = [CATALOG.schema(name, version) for name in CATALOG.events() for version in CATALOG.versions(name)]
LOAD_END = (
    "[2026-03-10 07:46:58 ATTN_CP5 TP5] Load weight end. elapsed=47.71 s, type=Qwen3NextForCausalLM, "
    "dtype=torch.bfloat16, avail mem=119.64 GB, mem usage=19.42 GB."
)


@pytest.fixture(autouse=True)
def _unbound_ranks() -> Any:
    kvlog.bind_ranks()
    yield
    kvlog.bind_ranks()
    structlog.reset_defaults()


def migrated(*lines: str) -> list[dict[str, Any]]:
    out = io.BytesIO()
    source = io.BytesIO("".join(f"{line}\n" for line in lines).encode())
    Migrator(load_chain(), MigrateOptions()).migrate("server.log", source, out)
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def emitted(event: events.Event, **ranks: int) -> dict[str, Any]:
    stream = io.BytesIO()
    kvlog.configure(output="json", validation="raise", stream=stream)
    kvlog.bind_ranks(**ranks)
    kvlog.emit(event)
    line: dict[str, Any] = orjson.loads(stream.getvalue())
    return line


def test_a_live_event_and_the_same_event_migrated_from_an_old_line_have_one_key_order() -> None:
    [old] = migrated(LOAD_END)
    fields = {k: v for k, v in old.items() if k not in envelope.FIELDS}
    live = emitted(events.WeightsLoadEnd(**fields), attn_cp=5, tp=5)
    assert {k: v for k, v in live.items() if k in fields} == fields
    # only a live event has a pid, only a migrated one its provenance; the rest is written alike
    assert [k for k in live if k != "pid"] == [k for k in old if k != "migrated"]
    assert list(live)[:6] == list(envelope.HEAD)


def test_every_event_schema_declares_the_envelope_first_in_the_written_order() -> None:
    common = set.intersection(*(set(schema["properties"]) for schema in SCHEMAS))
    assert common == set(envelope.FIELDS), "the envelope is what every event carries besides its own fields"
    for schema in SCHEMAS:
        declared = [k for k in schema["properties"] if k in envelope.FIELDS]
        assert declared[: len(envelope.HEAD)] == list(envelope.HEAD), schema["$id"]
        assert list(schema["properties"])[: len(declared)] == declared, schema["$id"]


def test_the_provenance_keys_are_the_ones_the_shared_schema_allows() -> None:
    [common] = CATALOG.shared.values()
    assert sorted(envelope.PROVENANCE) == sorted(common["$defs"]["migrated"]["properties"])


def test_ordered_puts_head_fields_ext_and_provenance_in_the_written_order() -> None:
    event = {
        "migrated": {"note": "a step's own key", "line": 3, "source_format": "kvlog-json/v1"},
        "avail_bytes": 1,
        "level": "info",
        "ext": {"engine": "x"},
        "timestamp": "2026-01-01T00:00:00Z",
        "event": "kv_memory.pool_end",
        "schema_version": 1,
    }
    ordered = envelope.ordered(event)
    assert ordered == event
    assert list(ordered) == ["event", "schema_version", "timestamp", "level", "avail_bytes", "ext", "migrated"]
    assert list(ordered["migrated"]) == ["source_format", "line", "note"]


def test_the_timestamp_rules_say_where_the_time_came_from() -> None:
    """A line with no time takes the nearest dated line's, before it or else after it; the epoch only when none is."""
    no_time = "Load weight begin. avail mem=78.83 GB"
    first, second, third = migrated(no_time, f"[2025-01-14 08:02:22 TP0] {no_time}", no_time)
    rules = [event["migrated"]["inferred"]["timestamp"] for event in (first, second, third)]
    assert [rule["rule"] for rule in rules] == ["next-line-timestamp", "naive-time-as-utc", "previous-line-timestamp"]
    assert first["timestamp"] == third["timestamp"] == "2025-01-14T08:02:22Z"
    assert rules[0] == {
        "rule": envelope.InferenceRule.NEXT_LINE_TIMESTAMP,
        "evidence": envelope.EVIDENCE[envelope.InferenceRule.NEXT_LINE_TIMESTAMP],
        "evidence_line": 2,
    }
    assert rules[2] == {
        "rule": envelope.InferenceRule.PREVIOUS_LINE_TIMESTAMP,
        "evidence": envelope.EVIDENCE[envelope.InferenceRule.PREVIOUS_LINE_TIMESTAMP],
        "evidence_line": 2,
    }
    [alone] = migrated(no_time)
    assert alone["timestamp"] == "1970-01-01T00:00:00Z"
    assert alone["migrated"]["inferred"]["timestamp"]["rule"] == "no-timestamp"
    assert "1970-01-01 stands for it" in alone["migrated"]["inferred"]["timestamp"]["evidence"]
    assert {rules[0]["rule"], rules[2]["rule"], "no-timestamp"} == envelope.TIMESTAMP_NOT_ON_LINE
