"""The live handler across a server's processes and its quiet spells: forked children, and a worker left idle.

sglang's launcher forks its schedulers (``multiprocessing``, the fork context) after configuring its own
logging: each child inherits the launcher's handler, must start afresh in it, and ends in ``os._exit``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
from pathlib import Path

import pytest
from follow_helpers import wait_for
from test_integrate_handler import START_UP, attached, decoded

import kvlog.integrate.handler as handler_module
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG


def _record(message: str) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO})


def _log_start_up(handler: EventHandler) -> None:
    """A scheduler's start-up, then its end (``multiprocessing``: ``os._exit``, past atexit and logging.shutdown)."""
    for message in START_UP:
        handler.handle(_record(message))


def test_a_forked_child_writes_its_own_events_and_those_still_held_when_it_ends(tmp_path: Path) -> None:
    """The pool that waits for its post-capture line at the child's end is written all the same, in its own file."""
    handler = EventHandler(SGLANG, str(tmp_path / "kv-{pid}.jsonl"), ranks={"tp": 0})
    handler.handle(_record(START_UP[0]))  # the launcher's own: its worker runs while the child is forked
    mine = tmp_path / f"kv-{os.getpid()}.jsonl"
    wait_for(lambda: len(decoded(mine)) == 1, what="the launcher's event")
    child = multiprocessing.get_context("fork").Process(target=_log_start_up, args=(handler,))
    child.start()
    child.join(60)
    handler.close()
    assert child.exitcode == 0
    theirs = decoded(tmp_path / f"kv-{child.pid}.jsonl")
    assert len(theirs) == len(START_UP)  # the pool and the lines after it, held until the child's end, too
    assert "kv_pool.allocation" in {event["event"] for event in theirs}
    assert {event["pid"] for event in theirs} == {child.pid}
    assert [event["event"] for event in decoded(mine)] == ["weights.load_begin"]


def test_a_forked_child_that_logs_nothing_says_nothing_of_its_parents_drops(tmp_path: Path) -> None:
    """Each child closes the launcher's handler at its exit: the launcher's notice must not be repeated per child."""
    handler = EventHandler(SGLANG, str(tmp_path / "missing" / "kv.jsonl"), ranks={"tp": 0})
    for message in START_UP[:2]:
        handler.handle(_record(message))
    wait_for(lambda: handler.dropped == 2, what="the launcher's two dropped records")
    said = tmp_path / "child-stderr.txt"
    pid = os.fork()
    if pid == 0:  # the child: its logging.shutdown closes every handler it inherited
        try:
            with said.open("w") as stderr:
                sys.stderr = stderr
                handler.close()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    handler.close()
    assert os.waitstatus_to_exitcode(status) == 0
    assert said.read_text() == ""


def test_records_after_a_quiet_spell_are_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server logs its start-up, then no memory line for a long while: the worker waits on through its idle ticks,
    and a later record's event is in the file while the server runs (a follower sees it then, not at the exit)."""
    idle = threading.Event()

    class _Watched(handler_module._Reading):
        def read(self, records: list[handler_module._Record]) -> None:
            super().read(records)
            if not records:  # a wake-up with nothing queued: the worker's idle tick
                idle.set()

    monkeypatch.setattr(handler_module, "_Reading", _Watched)
    monkeypatch.setattr(handler_module, "TICK_S", 0.01)
    logger, handler, events = attached(tmp_path)
    logger.info(START_UP[0])
    assert idle.wait(30), "the worker never woke idle"
    logger.info(START_UP[1])
    try:
        wait_for(lambda: len(decoded(events)) == 2, what="the event of the record after the quiet spell")
    finally:
        handler.close()
    assert [event["event"] for event in decoded(events)] == ["weights.load_begin", "weights.load_end"]
