"""What a record gives its event in the live handler: its time, pid, logger and call site; its file name.

The handler reads records, not printed lines: what a record says exactly replaces what a line could
only infer, and the events file is named per process and rank. These pin each of those fields.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from follow_helpers import wait_for
from test_integrate_handler import START_UP, VLLM_BLOCKS, attached, decoded

from kvlog.envelope import utc_timestamp
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG, VLLM

#: a record's time: a fixed instant, so that the event's timestamp can only have come from the record
CREATED = 1_780_000_000.25


def _record(message: str, *args: object, lineno: int = 42, created: float = CREATED) -> logging.LogRecord:
    record = logging.makeLogRecord(
        {"name": "sglang.srt.mem", "msg": message, "args": args, "levelno": logging.INFO, "lineno": lineno}
    )
    record.pathname, record.created = "/srv/sglang/mem.py", created
    return record


def test_an_event_takes_the_records_time_pid_logger_and_call_site(tmp_path: Path) -> None:
    _, handler, events = attached(tmp_path)
    handler.handle(_record(START_UP[0]))
    handler.close()
    (event,) = decoded(events)
    assert event["timestamp"] == utc_timestamp(CREATED)
    assert event["pid"] == os.getpid()
    assert event["ext"] == {"logger": "sglang.srt.mem", "code_file": "/srv/sglang/mem.py", "code_line": 42}
    migrated = event["migrated"]
    assert isinstance(migrated, dict)
    assert migrated["file"] is None
    assert migrated["line"] == 1
    assert "inferred" not in migrated, "the record's time is exact, and was all the line inferred"


def test_an_event_is_in_the_file_while_the_handler_still_runs(tmp_path: Path) -> None:
    """Each batch is flushed: a follower of the events file sees them live, not at the server's exit."""
    _, handler, events = attached(tmp_path)
    try:
        handler.handle(_record(START_UP[0]))
        wait_for(lambda: len(decoded(events)) == 1, what="the flushed event")
    finally:
        handler.close()


def test_a_record_without_a_call_site_gives_only_its_logger(tmp_path: Path) -> None:
    _, handler, events = attached(tmp_path)
    handler.handle(_record(START_UP[0], lineno=0))
    handler.handle(_record(START_UP[0], lineno=1))  # the first line of a file is a call site
    handler.close()
    assert [e["ext"] for e in decoded(events)] == [
        {"logger": "sglang.srt.mem"},
        {"logger": "sglang.srt.mem", "code_file": "/srv/sglang/mem.py", "code_line": 1},
    ]


def test_a_message_with_arguments_is_read_as_formatted(tmp_path: Path) -> None:
    _, handler, events = attached(tmp_path)
    handler.handle(_record("Load weight begin. avail mem=%.2f GB", 139.06))
    handler.handle(_record(START_UP[0]))  # the same line, written out
    handler.close()
    formatted, literal = decoded(events)
    assert formatted["event"] == literal["event"] == "weights.load_begin"
    assert formatted["avail_bytes"] == literal["avail_bytes"]


def test_each_line_of_a_multi_line_message_is_a_line_of_its_own(tmp_path: Path) -> None:
    _, handler, events = attached(tmp_path)
    handler.handle(_record("\n".join(START_UP)))
    handler.handle(_record(START_UP[0]))
    handler.close()
    written = decoded(events)
    assert [e["migrated"]["line"] for e in written] == [*range(1, len(START_UP) + 1), len(START_UP) + 1]  # type: ignore[index]


def test_a_record_a_filter_refuses_is_not_read(tmp_path: Path) -> None:
    _, handler, events = attached(tmp_path)
    handler.addFilter(lambda record: "end" not in record.getMessage())
    for message in START_UP[:2]:
        handler.handle(_record(message))
    handler.close()
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin"]


def test_a_record_handed_to_emit_is_read_as_one_handed_to_handle(tmp_path: Path) -> None:
    """``emit`` is the Handler API's own entry point: a dispatcher that calls it (not ``handle``) loses nothing."""
    _, handler, events = attached(tmp_path)
    handler.emit(_record(START_UP[0]))
    handler.close()
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin"]


def test_a_record_no_memory_line_could_be_is_not_read(tmp_path: Path) -> None:
    _, handler, events = attached(tmp_path)
    handler.handle(_record("GET /health 200"))
    handler.close()
    assert not events.exists()
    assert handler.written == handler.dropped == 0


@pytest.mark.parametrize(("ranks", "name"), [({"tp": 1}, "tp1"), ({"dp": 1, "tp": 1}, "dp1-tp1"), ({}, "main")])
def test_the_events_file_is_named_by_pid_and_rank(tmp_path: Path, ranks: dict[str, int], name: str) -> None:
    handler = EventHandler(SGLANG, str(tmp_path / "kv-{pid}-{rank}.jsonl"), ranks=ranks)
    handler.handle(_record(START_UP[0]))
    handler.close()
    assert [path.name for path in tmp_path.iterdir()] == [f"kv-{os.getpid()}-{name}.jsonl"]
    assert handler.written == 1


@pytest.mark.parametrize(
    ("process", "ranks"),
    [
        ({"vllm_process_name": "Worker_TP1", "processName": "MainProcess"}, {"tp": 1}),  # 0.2x on: vLLM names it
        ({"processName": "EngineCore_DP1"}, {"dp": 1}),  # before: the multiprocessing process's own name
        ({"processName": None}, None),  # logging.logMultiprocessing off: no name at all
    ],
    ids=["vllm process name", "multiprocessing name", "no name"],
)
def test_a_vllm_records_ranks_and_events_file_come_from_its_process_name(
    tmp_path: Path, process: dict[str, object], ranks: dict[str, int] | None
) -> None:
    """vLLM says a process's ranks nowhere but in its name (``EngineCore_DP1``, ``Worker_TP1``)."""
    handler = EventHandler(VLLM, str(tmp_path / "kv-{rank}.jsonl"))
    handler.handle(
        logging.makeLogRecord({"name": "vllm.v1.core", "msg": VLLM_BLOCKS, "levelno": logging.INFO, **process})
    )
    handler.close()
    name = "-".join(f"{key}{value}" for key, value in (ranks or {}).items()) or "main"
    assert [path.name for path in tmp_path.iterdir()] == [f"kv-{name}.jsonl"]
    (event,) = decoded(tmp_path / f"kv-{name}.jsonl")
    assert (event["event"], event.get("ranks")) == ("kv_pool.capacity", ranks)


def test_events_to_standard_error_are_written_there(capsys: pytest.CaptureFixture[str]) -> None:
    handler = EventHandler(SGLANG, "-", ranks={"tp": 0})
    handler.handle(_record(START_UP[0]))
    handler.close()
    err = capsys.readouterr().err
    assert err.startswith('{"event":"weights.load_begin",')
    assert err.count("\n") == 1
    assert handler.written == 1


def test_an_events_file_that_cannot_be_opened_drops_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = EventHandler(SGLANG, str(tmp_path / "missing" / "kv.jsonl"), ranks={"tp": 0})
    for message in START_UP[:2]:
        handler.handle(_record(message))
    handler.close()
    assert (handler.written, handler.dropped) == (0, 2)
    assert capsys.readouterr().err.splitlines() == [
        f"kvlog: {tmp_path}/missing/kv.jsonl: cannot write events: No such file or directory; "
        "this process's events are dropped",
        "kvlog: 2 records dropped (the queue was full or the events could not be written)",
    ]


def test_a_record_that_cannot_be_formatted_is_left_to_the_servers_own_handlers(tmp_path: Path) -> None:
    """``handle`` neither raises nor reads it, and answers True as ``logging.Handler.handle`` does for any record."""
    _, handler, events = attached(tmp_path)
    assert handler.handle(_record("Load weight begin. avail mem=%d GB", "not a number")) is True
    assert handler.handle(_record("GET /health 200")) is True
    assert handler.handle(_record(START_UP[0])) is True
    handler.close()
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin"]
    assert handler.written == 1
    assert handler.dropped == 0


POOL = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2652800, K size: 0.25 GB, V size: 0.25 GB"


@pytest.mark.parametrize(
    "header",
    [
        "[2026-01-01 00:00:00 TP3] ",  # sglang's prefix
        "[2026-01-01 00:00:00 TP3] INFO mem.py:12: ",  # with a custom format's level and call site
        "INFO mem.py:12: ",  # the level and call site alone, which a printed line's prefix may end with
        "(EngineCore_DP3 pid=99) INFO 01-01 00:00:00 [x.py:1] ",  # vLLM's
    ],
)
def test_a_message_that_starts_like_a_printed_line_keeps_its_records_header(tmp_path: Path, header: str) -> None:
    """What looks like a prefix inside a message is message text: it is never split off as a header.

    The record says the header (its time, pid and ranks); a wording that takes words before its own
    (a pool's label) takes that text as it takes any other.
    """
    _, handler, events = attached(tmp_path)
    handler.handle(_record(header + POOL))
    handler.close()
    (event,) = decoded(events)
    assert (event["timestamp"], event["pid"], event["ranks"]) == (utc_timestamp(CREATED), os.getpid(), {"tp": 0})
    assert event["label"] == header.strip()


def test_a_progress_bar_glued_before_a_message_keeps_the_records_header(tmp_path: Path) -> None:
    """A tqdm bar's carriage return before a memory line: the line after it is read, under the record's header."""
    _, handler, events = attached(tmp_path)
    handler.handle(_record(f"Loading 50%|#####     |\r{POOL}"))
    handler.close()
    (event,) = decoded(events)
    assert (event["event"], event["timestamp"], event["ranks"]) == (
        "kv_pool.allocation",
        utc_timestamp(CREATED),
        {"tp": 0},
    )
    migrated = event["migrated"]
    assert isinstance(migrated, dict)
    assert migrated["original"] == f"Loading 50%|#####     |\r{POOL}", "the message as logged, no prefix printed for it"


def test_a_vllm_record_without_a_process_id_gives_no_pid(tmp_path: Path) -> None:
    """``logging.logProcesses`` off: the record names no process, and the event claims none (not a pid 0)."""
    handler = EventHandler(VLLM, str(tmp_path / "kv.jsonl"))
    record = {"name": "vllm.v1", "msg": VLLM_BLOCKS, "levelno": logging.INFO, "processName": "Worker_TP1"}
    handler.handle(logging.makeLogRecord({**record, "process": None}))
    handler.close()
    (event,) = decoded(tmp_path / "kv.jsonl")
    assert (event["ranks"], "pid" in event) == ({"tp": 1}, False)
