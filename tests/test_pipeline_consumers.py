"""``plot`` and ``summarize`` take the engine's records in the process that runs it (``docs/pipeline.md``).

They once had ``migrate`` write its events (to memory, or a scratch file) and decoded them again.
These tests fail if the round trip comes back in one process: no event is encoded and written there,
no scratch directory is made, and no command module decodes JSON; and they hold the two paths
(records in one process, bytes shipped by worker processes) to the same table.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from migration_helpers import POOL_V1, too_deep_migrations

from kvlog import commands
from kvlog.demo import migration_tour
from kvlog.migration.encoders import Written
from kvlog.plot.timeline import timelines
from kvlog.summary import render, summarize_runs

CORPUS = Path(__file__).resolve().parent / "corpus"
BEFORE_FIX = CORPUS / "postcapture_before_fix_2026_07.log"
#: a memory line no rule reads: a dead letter, counted in the table
SHUFFLED = "[2026-07-21 09:03:50 TP1] KV memory shuffled: 12.00 GB moved somewhere"
WEIGHTS = """\
[2026-08-10 09:58:00 TP0] Load weight begin. avail mem=139.06 GB
[2026-08-10 09:59:40 TP0] Load weight end. elapsed=100.00 s, type=LlamaForCausalLM, dtype=torch.bfloat16, \
avail mem=72.91 GB, mem usage=66.15 GB.
[2026-08-10 10:00:05 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1703936, K size: 104.00 GB, \
V size: 104.00 GB
"""
#: the modules that take the engine's records in the process that runs it (and their packages' modules)
_CONSUMERS = ("kvlog.commands", "kvlog.plot", "kvlog.summary", "kvlog.demo")
_LOADS, _JSON_LOADS = orjson.loads, json.loads


def _not_from_a_consumer(loads: Any) -> Any:
    def checked(*args: Any, **kwargs: Any) -> Any:
        caller = str(sys._getframe(1).f_globals.get("__name__"))
        if caller in _CONSUMERS or caller.startswith(tuple(f"{name}." for name in _CONSUMERS)):
            raise AssertionError(f"{caller} decoded JSON in the process that made the events")
        return loads(*args, **kwargs)

    return checked


def _refused(*_: Any, **__: Any) -> Any:
    raise AssertionError("events were written as bytes, or spilled, in the process that takes them")


def _forbid_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail on any round trip: ``migrate``'s sink writing an event, a scratch directory, a command decoding JSON."""
    monkeypatch.setattr(Written, "record", _refused)
    monkeypatch.setattr(tempfile, "mkdtemp", _refused)  # TemporaryDirectory makes its directory so too
    monkeypatch.setattr(orjson, "loads", _not_from_a_consumer(_LOADS))
    monkeypatch.setattr(json, "loads", _not_from_a_consumer(_JSON_LOADS))


def _log_with_a_dead_letter(tmp_path: Path) -> Path:
    lines = BEFORE_FIX.read_text().splitlines()
    log = tmp_path / "weird.log"
    log.write_text("\n".join([*lines[:20], SHUFFLED, *lines[20:]]) + "\n")
    return log


def test_summarize_in_one_process_takes_the_records_and_dead_letters_without_a_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log_with_a_dead_letter(tmp_path)
    out, dead = io.BytesIO(), tmp_path / "dead.jsonl"
    assert commands.migrate(str(log), only_events=True, stdout=out, dead_letter=dead).exit_status == 0
    events = [orjson.loads(line) for line in out.getvalue().splitlines()]
    letters = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
    expected = summarize_runs(timelines(events), letters)
    assert expected.total("unparsed_memory_lines") == 1
    _forbid_round_trips(monkeypatch)
    for fmt in ("text", "json", "csv"):
        table = io.BytesIO()
        outcome = commands.summarize(str(log), output_format=fmt, stdout=table)
        assert (outcome.exit_status, outcome.events) == (0, len(events))
        assert table.getvalue().decode() == render(expected, fmt), fmt


def test_plot_takes_the_records_without_a_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_round_trips(monkeypatch)
    figure = tmp_path / "memory.html"
    outcome = commands.plot(str(_log_with_a_dead_letter(tmp_path)), output=figure)
    assert outcome.exit_status == 0 and outcome.runs > 0 and figure.stat().st_size > 0


def _events_with_a_wide_integer(tmp_path: Path) -> list[Path]:
    """Two files of current events whose weights are a byte count beyond 64 bits (the schema has no maximum)."""
    log = tmp_path / "server.log"
    log.write_text(WEIGHTS)
    out = io.BytesIO()
    assert commands.migrate(str(log), only_events=True, stdout=out).exit_status == 0
    wide = f'"mem_usage_bytes":{(1 << 64) + 1}'.encode()
    lines = [
        line.replace(f'"mem_usage_bytes":{orjson.loads(line)["mem_usage_bytes"]}'.encode(), wide)
        if b'"weights.load_end"' in line
        else line
        for line in out.getvalue().splitlines(keepends=True)
    ]
    assert sum(wide in line for line in lines) == 1
    first, second = tmp_path / "events.1.jsonl", tmp_path / "events.2.jsonl"
    first.write_bytes(b"".join(lines[:2]))
    second.write_bytes(b"".join(lines[2:]))
    return [first, second]


def test_a_byte_count_beyond_64_bits_is_summarized_exactly_in_one_process_and_on_workers(tmp_path: Path) -> None:
    """A record holds the integer exactly; a worker's shipped bytes are read exactly too: the same table."""
    inputs = [str(path) for path in _events_with_a_wide_integer(tmp_path)]
    tables = []
    for jobs in (1, 2):
        table = io.BytesIO()
        assert commands.summarize(inputs, output_format="json", jobs=jobs, stdout=table).exit_status == 0
        tables.append(table.getvalue())
    assert tables[0] == tables[1]
    runs = json.loads(tables[0])["runs"]  # the standard library keeps every integer
    assert [run["weights_bytes"] for run in runs] == [(1 << 64) + 1]


def test_an_event_migrate_cannot_write_is_a_dead_letter_of_summarize_too(tmp_path: Path) -> None:
    """A step nests ``ext`` deeper than JSON is written: ``migrate`` dead-letters it; the records path must as well."""
    too_deep_migrations(tmp_path)
    log = tmp_path / "deep.jsonl"
    log.write_bytes(orjson.dumps(POOL_V1) + b"\n")
    table = io.BytesIO()
    outcome = commands.summarize(str(log), output_format="json", migrations=tmp_path / "migrations", stdout=table)
    document = json.loads(table.getvalue())
    assert (outcome.exit_status, outcome.events, document["runs"]) == (1, 0, [])
    assert document["unparsed_outside_runs"] == 1


def test_the_demo_tour_takes_the_records_without_a_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_round_trips(monkeypatch)
    told = io.StringIO()
    assert migration_tour(told) == 8
    assert "inferred: allocation_state va_upper_bound" in told.getvalue()
