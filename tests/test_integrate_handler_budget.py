"""The bytes the live handler may hold in a server process (``--max-held``): its queue and its look-ahead together.

A count of records bounded nothing when a record is a megabyte, and an event waiting for its post-capture
line kept every record read since, for up to ``--hold``.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from follow_helpers import wait_for
from test_integrate_handler import START_UP, attached, decoded

import kvlog.integrate.handler as handler_module
from kvlog.cli.integrate import integrate
from kvlog.integrate import handler_for
from kvlog.integrate.budget import LINE_BYTES, MIN_HELD_BYTES, cost
from kvlog.integrate.handler import EventHandler
from kvlog.migration.candidates import MAX_LINE_BYTES

#: a record of many memory lines, one event each
LINES = 100
BURST = "\n".join([START_UP[0]] * LINES)
#: a line the probe passes that no rule reads, some 60 KB long
REQUEST = "Scheduler step. KV cache hit rate: 0.5, " + "x" * 60_000


def _held_back(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The worker waits (before its first read) until the event is set: whatever is logged meanwhile stays queued."""
    busy = threading.Event()

    class _Busy(handler_module._Reading):
        def __init__(self, handler: EventHandler) -> None:
            busy.wait(30)
            super().__init__(handler)

    monkeypatch.setattr(handler_module, "_Reading", _Busy)
    return busy


def _read_through(handler: EventHandler, line: int) -> bool:
    """Whether the worker has read every line up to ``line`` and is done with them (it holds ``_busy`` to read)."""
    reading = handler._reading
    return reading is not None and reading.run.number == line and not handler._busy.locked()


def test_records_beyond_the_budget_are_dropped_counted_and_the_held_bytes_never_exceed_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The queue once took 10,000 records whatever their size: here 20 bursts of 100 lines while the worker is busy."""
    busy = _held_back(monkeypatch)
    logger, handler, events = attached(tmp_path, max_held_bytes=MIN_HELD_BYTES)
    for _ in range(20):
        logger.info(BURST)
    taken = MIN_HELD_BYTES // cost(BURST)
    assert taken == 2  # the budget's arithmetic, as a user would size it: each line is charged LINE_BYTES
    assert (handler.budget.held, handler.budget.peak) == (taken * cost(BURST), taken * cost(BURST))
    assert handler.budget.peak <= MIN_HELD_BYTES < (taken + 1) * cost(BURST)
    busy.set()
    handler.close()
    assert (handler.written, handler.dropped, handler.over_budget) == (taken * LINES, 20 - taken, 20 - taken)
    assert len(decoded(events)) == taken * LINES
    assert handler.budget.held == 0  # everything written: every byte given back
    assert capsys.readouterr().err.splitlines() == [
        f"kvlog: {20 - taken} records dropped (the queue was full or the events could not be written)",
        f"kvlog: {20 - taken} of them because the handler held its 1 MiB (--max-held)",
    ]


def test_an_event_waiting_for_its_line_is_written_as_it_stands_before_the_records_after_it_fill_the_budget(
    tmp_path: Path,
) -> None:
    """A pool waits up to --hold for its post-capture line; the records read meanwhile were all kept, unbounded.
    Past half the budget the pool is written with what it has, and the server's records go on being read."""
    logger, handler, events = attached(tmp_path, max_held_bytes=MIN_HELD_BYTES, hold_s=3600.0)
    pool = 1 + next(i for i, message in enumerate(START_UP) if message.startswith("KV Cache is allocated"))
    for message in START_UP[:pool]:
        logger.info(message)
    wait_for(lambda: _read_through(handler, pool), what="the pool read")
    waiting = handler.budget.held  # the pool's record, and those read with it
    assert waiting > 0
    flood = 0
    while not any(e["event"] == "kv_pool.allocation" for e in decoded(events)):
        assert flood < 2 * MIN_HELD_BYTES // cost(REQUEST), "the pool still waits past the budget"
        logger.info(REQUEST)
        flood += 1
        wait_for(lambda lines=pool + flood: _read_through(handler, lines), what="the record read")
        assert handler.budget.held <= MIN_HELD_BYTES // 2 + cost(REQUEST)
    assert flood == (MIN_HELD_BYTES // 2 - waiting) // cost(REQUEST) + 1  # the first record past half of it
    handler.close()
    written = next(e for e in decoded(events) if e["event"] == "kv_pool.allocation")
    evidence = written["migrated"]["inferred"]["committed_bytes"]  # type: ignore[index]
    assert evidence["rule"] == "look-ahead-exhausted"
    assert "within 0.5 MiB of records held" in evidence["evidence"]
    assert (handler.dropped, handler.budget.held) == (0, 0)


def test_a_line_longer_than_the_engine_reads_is_not_held_and_keeps_its_place(tmp_path: Path) -> None:
    """A configuration dumped in one record (here 4 MiB on one line, four times the budget) is only a line to count."""
    logger, handler, events = attached(tmp_path, max_held_bytes=MIN_HELD_BYTES)
    dumped = "Using config: " + "x" * (4 << 20)
    logger.info(f"{dumped}\n{START_UP[0]}")
    handler.close()
    (event,) = decoded(events)
    assert event["event"] == "weights.load_begin"
    assert event["migrated"]["line"] == 2  # type: ignore[index]
    assert (handler.dropped, handler.budget.peak) == (0, cost("\n" + START_UP[0]))
    assert handler.budget.peak < 2 * LINE_BYTES + MAX_LINE_BYTES


def test_the_budget_goes_from_the_command_line_to_each_processs_handler() -> None:
    printed = CliRunner().invoke(integrate, ["sglang", "--events", "-", "--max-held", "8"])
    assert printed.exit_code == 0, printed.output
    options = json.loads(printed.output)["handlers"]["kvlog"]
    assert options["max_held_bytes"] == 8 << 20
    made = handler_for(**{key: value for key, value in options.items() if key != "()"}, server_default=False)
    assert isinstance(made, EventHandler)
    assert (made.max_held_bytes, made.budget.limit) == (8 << 20, 8 << 20)
    made.close()
    logging.getLogger().removeHandler(made)
