"""The line pipeline's design: the engine hands on ``Record``s, and no consumer parses back what it wrote.

``kvlog follow`` and the live handler once decoded the JSON the engine had just encoded, and the
engine carried its own notes (``_source``, ``_source_version``) inside the event dict; the handler also
printed a prefix for each record only for the engine to split it off again. These tests fail if any
of that comes back (``docs/pipeline.md``).
"""

from __future__ import annotations

import io
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from migration_helpers import Taken, shipped_chain
from test_integrate_handler import START_UP

from kvlog.commands._migrate import migrator_for
from kvlog.follow.follower import EventOutput, Follower
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG, VLLM
from kvlog.io.tailing import Tailer
from kvlog.migration.candidates import MAX_LINE_BYTES
from kvlog.migration.engine import FileRun, MigrateOptions, Migrator
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport
from kvlog.text.prefix import SGLANG as SGLANG_PREFIX
from kvlog.text.prefix import LinePrefix, SglangPrefix, VllmPrefix

CORPUS = Path(__file__).parent / "corpus"
POOL = (
    "[2026-07-24 08:00:32 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2652800, "
    "K size: 0.25 GB, V size: 0.25 GB"
)
SIZED = "[2026-07-24 08:01:40 TP0] Post-capture KV sizing: max_total_num_tokens=2097152, free memory=96.33 GB"
LOG = f"request 1\n{POOL}\nrequest 2\n{SIZED}\n"


#: the modules that take the engine's records in the process that runs it
CONSUMERS = frozenset({"kvlog.follow.follower", "kvlog.integrate.handler"})
_LOADS = orjson.loads


def _no_parsing(data: Any) -> Any:
    """``orjson.loads``, but for a consumer: it has the event itself, and must not decode what it encoded."""
    if sys._getframe(1).f_globals.get("__name__") in CONSUMERS:
        raise AssertionError("a consumer parsed back bytes the engine wrote in this process")
    return _LOADS(data)


def test_a_record_is_a_frozen_value_with_the_event_and_where_it_came_from() -> None:
    """A named tuple: immutable (a downstream cannot change what the next one is handed), cheap to build."""
    record = Record({"event": "x"}, 1, b"x\n", "sglang-text/2024-10", 1)
    with pytest.raises(AttributeError):
        record.line = 2  # type: ignore[misc]
    assert not hasattr(record, "__dict__")
    assert (record.glue, record.verbatim) == (("", ""), False)
    assert list(Record._fields) == [
        "event",
        "line",
        "raw",
        "source_format",
        "source_version",
        "glue",
        "verbatim",
    ]


@pytest.mark.parametrize("output_format", ["jsonl", "text", "legacy"])
def test_no_event_leaves_the_engine_with_a_key_of_its_own(output_format: str) -> None:
    """What the engine knows of a line (its wording, the version it said) is on the record, not in the event."""
    data = LOG.encode()
    taken = Taken()
    migrator = Migrator(shipped_chain(), MigrateOptions(output_format=output_format))  # type: ignore[arg-type]
    run = FileRun(migrator, "x.log", MigrationReport(files=1), None, taken)
    run.feed(data)
    run.finish()
    assert [record.line for record in taken.records] == [2, 4]
    for record in taken.records:
        assert not [key for key in record.event if key.startswith("_")]
        assert record.source_format and record.source_version is not None
        assert record.raw == data.splitlines(keepends=True)[record.line - 1]
    assert taken.passed.getvalue() == b"request 1\nrequest 2\n"


class _Seen:
    def __init__(self) -> None:
        self.events: list[Mapping[str, Any]] = []

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        self.events.append(event)

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        pass

    def count_violations(self, count: int, *, instance: str) -> None:
        pass


def test_a_follower_tells_its_observers_the_events_without_parsing_what_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(LOG)
    seen = _Seen()
    output = EventOutput(str(out), io.BytesIO())
    migrator = migrator_for(None, MigrateOptions(only_events=True))
    follower = Follower(migrator, output, observers=[seen], clock=time.monotonic)
    tailer = Tailer((str(log),), max_line_bytes=MAX_LINE_BYTES)
    monkeypatch.setattr(orjson, "loads", _no_parsing)
    tailer.poll(follower)
    follower.finish()
    tailer.close()
    output.close()
    monkeypatch.undo()
    written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [event["migrated"]["line"] for event in written] == [2, 4]
    assert seen.events == written


def test_the_live_handler_writes_its_events_without_parsing_what_the_engine_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orjson, "loads", _no_parsing)
    handler = EventHandler(SGLANG, str(tmp_path / "kv.jsonl"), ranks={"tp": 0})
    for message in START_UP:
        handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO}))
    handler.close()
    monkeypatch.undo()
    written = (tmp_path / "kv.jsonl").read_bytes().splitlines()
    assert handler.written == len(written) > 0
    assert all(orjson.loads(line)["migrated"]["file"] is None for line in written)


def _no_prefix(*_args: object) -> str:
    raise AssertionError("the live handler printed or split a line prefix")


def test_the_live_handler_neither_prints_nor_splits_a_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record's time, pid and ranks are its message's header as they are: no text stands for them.

    Every server's prefix refuses to build or split: a handler that printed a prefix for the engine to
    split again (or split a message) fails its batches, and writes nothing.
    """
    sglang = EventHandler(SGLANG, str(tmp_path / "sglang.jsonl"), ranks={"tp": 0})
    vllm = EventHandler(VLLM, str(tmp_path / "vllm.jsonl"))
    for server in (SglangPrefix, VllmPrefix):
        monkeypatch.setattr(server, "build", _no_prefix)
        monkeypatch.setattr(server, "split", _no_prefix)
    messages = [*START_UP, "\n".join(START_UP[:2]), "KV Cache is allocated, but in no wording kvlog knows: 4 GB"]
    for message in messages:
        sglang.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO}))
    vllm_record = {"name": "vllm.v1", "msg": "# GPU blocks: 2048, # CPU blocks: 512", "processName": "EngineCore_DP1"}
    vllm.handle(logging.makeLogRecord({**vllm_record, "levelno": logging.INFO}))
    sglang.close()
    vllm.close()
    monkeypatch.undo()
    assert capsys.readouterr().err == ""
    assert (sglang.written, vllm.written) == (len(START_UP) + 2, 1)


def _records(feed: Any, options: MigrateOptions | Migrator) -> list[Record]:
    taken = Taken()
    migrator = options if isinstance(options, Migrator) else Migrator(shipped_chain(), options)
    run = FileRun(migrator, None, MigrationReport(files=1), None, taken)
    feed(run)
    run.finish()
    return taken.records


@pytest.mark.parametrize("log", ["gen2_2025.log", "postcapture_before_fix_2026_07.log", "hybrid_swa_2026.log"])
def test_a_header_said_is_read_as_the_same_header_printed(log: str) -> None:
    """A record's path into the engine differs from a printed line's only in where the header comes from.

    Each line of a log, fed as the message its prefix heads with that prefix's header as said, gives
    the events its printed line gives: the same wordings, context, look-ahead and corrections. Only
    ``migrated.original`` (the text as read) and ``raw`` differ: the said line has no prefix to quote.
    """
    lines = (CORPUS / log).read_text().splitlines()
    said = [SGLANG_PREFIX.split(line) for line in lines]
    options = MigrateOptions(only_events=True, source="sglang")
    printed = _records(lambda run: run.feed("".join(f"{line}\n" for line in lines).encode()), options)
    headed = _records(lambda run: run.messages(said), options)

    def unquoted(record: Record) -> dict[str, Any]:
        return {**record.event, "migrated": {k: v for k, v in record.event["migrated"].items() if k != "original"}}

    assert len(headed) == len(printed) > 0
    assert [unquoted(r) for r in headed] == [unquoted(r) for r in printed]
    assert [(r.line, r.source_format, r.source_version) for r in headed] == [
        (r.line, r.source_format, r.source_version) for r in printed
    ]


def test_a_header_said_exactly_marks_no_time_inferred() -> None:
    """A record's time is the instant, in UTC: the event takes it as it is, with no provenance note for it.

    Also where the migrator read the same message printed before (a printed time is inferred: its
    event is no copy for a said one), and for the second record (the first's event reused).
    """
    message = START_UP[0]  # weights.load_begin: no step of it names the time, so its event is reused
    said = LinePrefix("2026-07-24T08:00:32.250000Z", {"tp": 1}, None, message, exact=True)  # no pid: as printed
    migrator = Migrator(shipped_chain(), MigrateOptions(only_events=True))
    line = f"[2026-07-24 08:00:32 TP1] {message}\n"
    printed = _records(lambda run: run.feed((line * 2).encode()), migrator)
    assert [r.event["migrated"]["inferred"]["timestamp"]["rule"] for r in printed] == ["naive-time-as-utc"] * 2
    records = _records(lambda run: run.messages([said, said]), migrator)
    assert len(records) == 2
    for record in records:
        event = record.event
        assert (event["timestamp"], event["ranks"]) == ("2026-07-24T08:00:32.250000Z", {"tp": 1})
        assert "timestamp" not in event["migrated"].get("inferred", {})
        assert record.raw == message.encode() + b"\n"
