"""A server that forks while kvlog's handler is at work: each child starts afresh, whatever the moment.

sglang's launcher forks its schedulers just after configuring its logging, while the handler's worker
may be reading the launcher's first records. Real forks, in a fresh interpreter (``integrate_forks``):
there every module the worker uses is imported for the first time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kvlog.integrate.handler import CLOSE_S

SCRIPT = Path(__file__).parent / "integrate_forks.py"
#: one scheduler's start-up (``integrate_forks.START_UP``): 7 records, 7 events
START_UP_EVENTS = 7


def _run(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=CLOSE_S * 40, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.split()


def _assert_started_afresh(directory: Path, child: str) -> None:
    """The child's own events, all of them; nothing half imported when it began; nothing said (no close bound)."""
    assert (directory / f"importing-{child}.txt").read_text() == ""
    events = [orjson.loads(line) for line in (directory / f"kv-{child}.jsonl").read_bytes().splitlines()]
    assert len(events) == START_UP_EVENTS
    assert {event["pid"] for event in events} == {int(child)}
    assert (directory / f"said-{child}.txt").read_text() == ""


def test_the_worker_imports_nothing_once_the_handler_is_made(tmp_path: Path) -> None:
    """What it needs (the validator, its reference engine, the metrics extra) is imported by the configuring
    thread: a fork can never catch the worker inside an import, whatever the records (a start-up, a line no
    rule reads, another tool's provenance)."""
    assert _run("imports", str(tmp_path)) == []


def test_a_child_forked_while_the_worker_would_import_writes_its_events(tmp_path: Path) -> None:
    """Forked while the worker is inside an import, the child inherited the module half initialised and its lock
    held by a thread it does not have: every batch failed, or the worker waited on the lock for ever."""
    (child,) = _run("moment", str(tmp_path))
    _assert_started_afresh(tmp_path, child)


@pytest.mark.parametrize("children", [12])
def test_children_forked_while_records_flow_each_write_their_own_events(tmp_path: Path, children: int) -> None:
    """Forks at whatever moment they fall, the launcher's records flowing all along: none may inherit a lock or
    a module mid-import (their close would wait out its bound, their events lost)."""
    pids = _run("flood", str(tmp_path), str(children))
    assert len(pids) == children
    for child in pids:
        _assert_started_afresh(tmp_path, child)
