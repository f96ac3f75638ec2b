"""Files of kvlog events whose fields hold anything JSON can: no command that reads them may crash.

``kvlog migrate`` copies a current event as it is and upgrades an old one through steps that write into
its provenance, and ``plot``, ``summarize`` and ``follow``'s metrics read what ``migrate`` writes. Each of
them once trusted the schema's shapes somewhere (a rank used as a dict key, ``migrated`` filled in as
an object, ``arena_ids`` iterated, a provenance number beyond 64 bits handed to the compiled
validator) and crashed on another tool's or a hand-edited event. Here every declared migration
example, old and current, gets one field, a rank, or one ``migrated`` key replaced by a hostile value,
and goes through every reader: each must write one line per input line, or its figure or table, and
raise nothing.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlog.file_validation import Counts, validate_lines
from kvlog.metrics.series import MemorySeries
from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.plot.timeline import timelines
from kvlog.schema.event_validator import EventValidator
from kvlog.summary import summarize_runs

CHAIN = load_chain()
EXAMPLES = [event for step in CHAIN.steps for example in step.examples for event in example]
MIGRATORS = [Migrator(CHAIN, MigrateOptions(output_format=fmt)) for fmt in ("jsonl", "text", "legacy")]
HOSTILE = [None, [], {}, "", "text", -1, 0, 2**70, 1.5, 1e308, True, [1, "a"], {"a": {"b": []}}, "\u0000"]
PROVENANCE_KEYS = ["source_format", "file", "line", "steps", "inferred", "uncertainty_bytes", "lost", "original"]


@st.composite
def hostile_events(draw: st.DrawFn) -> dict[str, Any]:
    event = dict(draw(st.sampled_from(EXAMPLES)))
    value = draw(st.sampled_from(HOSTILE))
    where = draw(st.sampled_from(["field", "rank", "provenance", "drop"]))
    if where == "field":
        event[draw(st.sampled_from(sorted(event)))] = value
    elif where == "rank":
        event["ranks"] = {"tp": value} if draw(st.booleans()) else {"dp": 0, "tp": value}
    elif where == "provenance":
        migrated = event.get("migrated")
        event["migrated"] = {**(migrated if isinstance(migrated, dict) else {"source_format": "kvlog-json/v1"})}
        event["migrated"][draw(st.sampled_from(PROVENANCE_KEYS))] = value
    else:
        del event[draw(st.sampled_from(sorted(event)))]
    return event


#: the values that broke a reader before: containers where a scalar goes, text where a number does, wide numbers
SHAPES = [[], {}, "text", 2**70]


def every_field_replaced(event: dict[str, Any]) -> list[dict[str, Any]]:
    """``event`` with each of its fields, each rank and each provenance key replaced by each of ``SHAPES``."""
    migrated = event.get("migrated") if isinstance(event.get("migrated"), dict) else {"source_format": "kvlog-json/v1"}
    return [
        *({**event, key: value} for key in event for value in SHAPES),
        *({**event, "ranks": {"dp": 0, "tp": value}} for value in SHAPES),
        *({**event, "migrated": {**migrated, key: value}} for key in PROVENANCE_KEYS for value in SHAPES),
    ]


@pytest.mark.parametrize("number", range(len(EXAMPLES)), ids=lambda n: f"{EXAMPLES[n].get('event')}#{n}")
def test_every_field_of_every_example_in_every_shape_that_broke_a_reader_is_read_without_a_crash(number: int) -> None:
    for event in every_field_replaced(EXAMPLES[number]):
        read_by_every_reader(event)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_events())
def test_every_reader_of_event_files_survives_any_value_in_any_field(event: dict[str, Any]) -> None:
    read_by_every_reader(event)


def read_by_every_reader(event: dict[str, Any]) -> None:
    """migrate (three formats), validate, the timeline and summary, and the metrics of ``event``'s line."""
    line = json.dumps(event).encode()  # json, not orjson: it writes integers beyond 64 bits as they are
    data = line + b"\n"
    events: list[dict[str, Any]] = []
    for migrator in MIGRATORS:
        out, dead = io.BytesIO(), []
        report = migrator.migrate("events.jsonl", io.BytesIO(data), out, dead.append)
        assert out.getvalue().count(b"\n") == 1, "one output line for the one input line"
        assert report.rejected <= len(dead) <= 1, "a line refused or not understood is one dead letter"
        if migrator.options.output_format == "jsonl":
            written = json.loads(out.getvalue())
            events = [written] if isinstance(written, dict) else []
            assert dead or written == event or EventValidator().is_valid(written), "copied, or migrated valid"
    list(validate_lines("events.jsonl", io.BytesIO(data), Counts(), EventValidator()))
    summarize_runs(timelines(events), [])
    series = MemorySeries()
    for one in events:
        series.observe(one, instance="fuzz")
    series.samples()
