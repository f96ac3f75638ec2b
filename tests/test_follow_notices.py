"""What ``kvlog follow`` says: lines too long to read (issue 30 item 6) and file names (issue 35 item 12).

A follower reads what the tailer hands it, and says what it could not read. A line over the 64 KiB a
memory line may take is skipped as it streams past, yet it is said and counted, as ``kvlog migrate``
dead-letters it and ``kvlog validate`` reports a line too long for an event. Every notice names files
as ``kvlog validate`` does (``kvlog.text.printable``): a name a followed directory may hold (a newline
and ``::error::``, a terminal escape, bytes that are not UTF-8) never ends a notice or drives a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from follow_helpers import append, passes

from kvlog.migration.candidates import MAX_LINE_BYTES

POOL = (
    "[2026-07-21 09:00:01 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 9.00 GB, "
    "V size: 9.00 GB"
)
LOAD = "[2026-07-21 09:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
#: a memory line no rule reads, with a byte that is not UTF-8 and a terminal escape
UNREAD = b"[2026-07-21 09:00:02 TP0] KV Cache is allocated. something new: 12.5 GB \xff\x1b[2J\n"
#: names whoever can create a file in a followed directory may choose
HOSTILE = ["x\n::error::owned.log", "\x1b]0;pwned\x07.log", os.fsdecode(b"bad\xff.log")]


class Unparsed:
    """An observer that keeps the counts of lines no rule read."""

    def __init__(self) -> None:
        self.unparsed = 0

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        pass

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        self.unparsed += lines

    def count_violations(self, count: int, *, instance: str) -> None:
        pass


@pytest.mark.parametrize("size", [MAX_LINE_BYTES + 10, 3 * MAX_LINE_BYTES, 12 << 20])
@pytest.mark.parametrize("arrives", ["at once", "in pieces"])
def test_a_line_too_long_to_read_is_said_and_counted_with_its_length(tmp_path: Path, size: int, arrives: str) -> None:
    log = tmp_path / "server.log"
    log.touch()
    long = POOL + " " * (size - len(POOL))
    seen = Unparsed()
    with passes(str(log), observers=[seen]) as run:
        run.poll()
        if arrives == "at once":
            append(log, long + "\n" + LOAD)
        else:
            for start in range(0, len(long), 1 << 20):
                append(log, long[start : start + (1 << 20)])
                run.poll()
            append(log, "\n" + LOAD)
        while run.poll():  # one pass reads 4 MiB of a file
            pass
    assert run.notices == [
        f"{log}:1: a line of {size + 1} bytes, over the 64 KiB a memory line may take: not read: {long[:200]}"
    ]
    assert seen.unparsed == 1
    assert len(run.events()) == 1  # the line after it is read


def test_a_line_too_long_to_read_that_ends_the_file_is_said_when_the_file_is_closed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(POOL + " " * (2 * MAX_LINE_BYTES))
    with passes(str(log), drain_s=0.0) as run:
        run.poll()
        log.rename(tmp_path / "server.log.1")  # rotated away: read to its end, then closed
        run.poll()
    assert [notice.partition(": not read")[0] for notice in run.notices] == [
        f"{log}:1: a line of {len(POOL) + 2 * MAX_LINE_BYTES} bytes, over the 64 KiB a memory line may take"
    ]


@pytest.mark.parametrize("name", HOSTILE)
def test_every_notice_names_files_escaped_as_validate_does(tmp_path: Path, name: str) -> None:
    """35.12: a notice names the file as ``kvlog validate`` does; no name starts a line or sends an escape."""
    log = tmp_path / name
    log.write_bytes(UNREAD)
    shown = str(tmp_path) + "/" + name.replace("\n", "\\n").replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    shown = shown.replace("\udcff", "\\xff")
    with passes(str(tmp_path)) as run:
        run.poll()
        log.write_bytes(UNREAD)  # copytruncate: written anew, shorter than what was read
        log.write_text("")
        run.poll()
        append(log, UNREAD)
        run.poll()
    assert run.notices, "the follower says something about the file"
    for notice in run.notices:
        assert notice.isprintable(), notice
        assert notice.startswith(shown + ":"), notice
    unread = [notice for notice in run.notices if "not valid UTF-8" in notice]
    assert unread and all(notice.endswith("12.5 GB \\xff\\x1b[2J") for notice in unread)  # the log's bytes, escaped


def test_a_file_that_cannot_be_opened_is_named_escaped(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root opens any file")
    log = tmp_path / "x\n::error::locked.log"
    log.write_bytes(UNREAD)
    log.chmod(0)
    with passes(str(tmp_path)) as run:
        run.poll()
    assert run.notices == [
        f"{tmp_path}/x\\n::error::locked.log: cannot open: Permission denied; not followed until it can be read"
    ]
