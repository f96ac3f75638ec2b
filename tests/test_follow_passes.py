"""``kvlog follow``'s passes, driven one by one through the library: what each pass writes, and what it leaves quiet."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from follow_helpers import append, corpus_text, migrated, passes

from kvlog.follow.follower import EventOutput, _line_end_at_or_after
from kvlog.follow.state import FileMark, FollowState, digest
from kvlog.io.errors import OutputError
from kvlog.io.tailing import READ_BYTES

FILLER = "an ordinary line, not about memory\n"


def events_of(tmp_path: Path, text: str) -> int:
    """How many events ``kvlog migrate`` makes of ``text`` alone: those of the lines a log held at the start."""
    prefix = tmp_path / "prefix.log"
    prefix.write_text(text)
    return len(migrated(prefix))


def test_new_only_leaves_the_lines_before_a_half_written_last_line_quiet(tmp_path: Path) -> None:
    """The first pass ends at the last newline, before the start's size: its lines were there before the start."""
    log = tmp_path / "server.log"
    before = corpus_text("gen2_2025.log")
    log.write_text(before + "an ordinary li")
    with passes(str(log), new_only=True) as run:
        run.poll()
        assert run.events() == []
        append(log, "ne\n" + corpus_text("hybrid_swa_2026.log"))
        run.poll()
    old = events_of(tmp_path, before)
    assert old > 0
    assert run.events() == migrated(log)[old:]


def test_new_only_leaves_a_log_larger_than_one_pass_quiet(tmp_path: Path) -> None:
    """A first pass reads ``READ_BYTES``; the passes that catch up on the rest write nothing that was there."""
    log = tmp_path / "server.log"
    before = corpus_text("gen2_2025.log") + FILLER * (READ_BYTES // len(FILLER) + 1)
    log.write_text(before)
    with passes(str(log), new_only=True) as run:
        assert run.poll()  # behind: the log is larger than one pass
        while run.poll():
            pass
        assert run.events() == []
        append(log, corpus_text("hybrid_swa_2026.log"))
        run.poll()
    assert run.events() == migrated(log)[events_of(tmp_path, before) :]


LOAD = "[2026-07-21 09:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
POOL = (
    "[2026-07-21 09:00:01 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 9.00 GB, "
    "V size: 9.00 GB\n"
)
SIZED = "[2026-07-21 09:01:00 TP0] Post-capture KV sizing: max_total_num_tokens=800, free memory=3.00 GB\n"
UNREAD = "[2026-07-21 09:00:02 TP0] KV Cache is allocated. something new: 12.5 GB\n"


class Seen:
    """An observer that keeps what a follower tells it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.unparsed: list[tuple[int, str]] = []
        self.violations: list[tuple[int, str]] = []

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        self.events.append((event["event"], instance))

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        self.unparsed.append((lines, instance))

    def count_violations(self, count: int, *, instance: str) -> None:
        self.violations.append((count, instance))


def unread(log: Path, line: int, text: str) -> str:
    """The notice of a memory-like line no rule reads."""
    return f"{log}:{line}: looks like a memory line but matches no known sglang wording: {text.strip()}"


def allocation_rule(line: bytes) -> str:
    rule: str = orjson.loads(line)["migrated"]["inferred"]["allocation_state"]["rule"]
    return rule


def test_an_event_is_held_until_its_hold_has_run_out_to_the_instant(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    with passes(str(log), hold_s=0.5) as run:
        run.poll()
        assert len(run.events()) == 1  # the pool waits for a later line
        run.clock.now += 0.25
        run.poll()
        assert len(run.events()) == 1
        run.clock.now += 0.25  # read exactly hold_s ago
        run.poll()
        pool = orjson.loads(run.events()[1])
    inferred = pool["migrated"]["inferred"]["allocation_state"]
    assert inferred["rule"] == "look-ahead-exhausted"
    assert "within 0.5 s;" in inferred["evidence"]


def test_a_state_taken_while_the_first_pieces_event_waits_marks_the_file_at_its_start(tmp_path: Path) -> None:
    """No piece is all written yet: a restart must read the file from its start (its lines' events again)."""
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    with passes(str(log)) as run:
        run.poll()
        assert len(run.events()) == 1  # the pool waits for a later line
        (mark,) = run.follower.state(None).files
    assert (mark.line, mark.offset) == (1, 0)


def test_a_state_marks_the_end_of_the_last_piece_whose_events_are_all_written(tmp_path: Path) -> None:
    """A restart reads again only from where the events stop being written: not from the start, not past it."""
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    with passes(str(log)) as run:
        run.poll()  # the pool waits
        append(log, SIZED + POOL.replace("TP0", "TP1"))
        run.poll()  # the first pool is settled, the second piece's own pool waits
        (mark,) = run.follower.state(None).files
    assert (mark.line, mark.offset) == (3, len(LOAD + POOL))


def test_an_event_on_a_logs_first_line_waits_its_hold_too(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(POOL)
    with passes(str(log), hold_s=0.5) as run:
        run.poll()
        run.clock.now += 0.25
        run.poll()
        assert run.events() == []  # nothing has waited its hold yet: nothing is released
        run.clock.now += 0.25
        run.poll()
        assert len(run.events()) == 1


def test_evidence_read_within_the_hold_settles_the_event(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    with passes(str(log), hold_s=0.5) as run:
        run.poll()
        run.clock.now += 0.25
        append(log, SIZED)
        run.poll()
        run.clock.now += 0.25  # the pool's hold runs out, but its evidence was read: nothing waits now
        run.poll()
        events = run.events()
    assert events == migrated(log)
    assert allocation_rule(events[1]) == "post-capture-after-pool"


def test_only_pieces_read_hold_s_ago_are_released(tmp_path: Path) -> None:
    """A pool read later than the first waits its own hold: the first's running out releases only the first."""
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    second = POOL.replace("TP0", "TP1")
    with passes(str(log), hold_s=1.0) as run:
        run.poll()
        run.clock.now += 0.5
        append(log, LOAD.replace("TP0", "TP1") + second)
        run.poll()
        run.clock.now += 0.5
        run.poll()
        assert [orjson.loads(line)["ranks"] for line in run.events()] == [{"tp": 0}, {"tp": 0}, {"tp": 1}]
        run.clock.now += 0.5
        run.poll()
        assert len(run.events()) == 4


def test_without_a_state_the_end_writes_what_still_waits(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    with passes(str(log)) as run:
        run.poll()
        run.follower.finish()
        run.output.commit()
        assert run.events() == migrated(log)


def test_new_only_writes_a_file_found_after_the_start_whole(tmp_path: Path) -> None:
    first, later = tmp_path / "tp0.log", tmp_path / "tp1.log"
    first.write_text(corpus_text("gen2_2025.log"))
    with passes(str(tmp_path / "*.log"), new_only=True) as run:
        run.poll()
        later.write_text(corpus_text("gen3_dtype_2026.log"))
        run.poll()
    assert run.events() == migrated(later)


def test_new_only_reads_a_file_truncated_after_the_start_again_whole(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(corpus_text("gen2_2025.log"))
    with passes(str(log), new_only=True) as run:
        run.poll()
        log.write_text(corpus_text("gen3_dtype_2026.log")[:100].rpartition("\n")[0] + "\n")
        run.poll()
        append(log, corpus_text("gen3_dtype_2026.log")[100:].partition("\n")[2])
        run.poll()
    assert run.events() == migrated(log)
    assert run.notices == [f"{log}: truncated (rotated by copytruncate?): following it from its start"]


def test_new_only_quiet_lines_still_feed_the_observers(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL + SIZED + UNREAD)
    seen = Seen()
    with passes(str(log), new_only=True, observers=[seen]) as run:
        run.poll()
        assert run.events() == []
        append(log, UNREAD)
        run.poll()
    names = [orjson.loads(line)["event"] for line in migrated(log)]
    assert seen.events == [(name, str(log)) for name in names]
    assert seen.unparsed == [(0, str(log)), (1, str(log)), (1, str(log))]  # 0 when first followed, then each pass's
    assert run.notices == [unread(log, 5, UNREAD)]


def test_observers_count_each_passes_new_violations_once_and_no_unparsed_line_for_them(tmp_path: Path) -> None:
    """An old JSON event that cannot be read is a schema violation (``kvlog_schema_violations_total``)."""
    broken = '{"event": "kv_pool.allocation", "schema_version": 1, \n'
    log = tmp_path / "server.log"
    log.write_text(LOAD + broken)
    seen = Seen()
    with passes(str(log), observers=[seen]) as run:
        run.poll()
        append(log, broken + LOAD)
        run.poll()
        append(log, LOAD)
        run.poll()  # nothing new to count
    assert seen.violations == [(0, str(log)), (1, str(log)), (1, str(log))]
    assert seen.unparsed == [(0, str(log))]  # the counters exist from the file's first sight
    assert [name for name, _ in seen.events] == ["weights.load_begin"] * 3


def test_exports_are_told_each_written_event_once_and_no_quiet_one(tmp_path: Path) -> None:
    """A restart's re-read and new-only's lines before the start rebuild the gauges; nothing of them leaves."""
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL + SIZED)
    gauges, sent = Seen(), Seen()
    with passes(str(log), new_only=True, observers=[gauges], exports=[sent]) as first:
        first.poll()
        append(log, LOAD.replace("TP0", "TP1"))
        first.poll()
        saved = first.follower.state(None)
    append(log, LOAD.replace("TP0", "TP2"))
    again_gauges, again_sent = Seen(), Seen()
    with passes(str(log), state=saved, observers=[again_gauges], exports=[again_sent]) as restart:
        restart.poll()
    names = [orjson.loads(line)["event"] for line in migrated(log)]
    assert [name for name, _ in gauges.events] == names[:-1]
    assert [name for name, _ in again_gauges.events] == names  # the whole history rebuilds the gauges
    written = [orjson.loads(line)["event"] for line in first.events() + restart.events()]
    assert written == ["weights.load_begin", "weights.load_begin"]
    assert [name for name, _ in sent.events + again_sent.events] == written  # each sent once, as written


def test_a_restart_writes_only_the_lines_its_state_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL + SIZED + UNREAD)
    with passes(str(log)) as first:
        first.poll()
        saved = first.follower.state(None)
    append(log, LOAD.replace("TP0", "TP1") + UNREAD.replace("TP0", "TP1"))
    with passes(str(log), state=saved) as restart:
        restart.poll()
    assert first.events() + restart.events() == migrated(log)
    assert restart.notices == [unread(log, 6, UNREAD.replace("TP0", "TP1"))]


def test_a_state_marks_lines_and_the_offset_they_end_at_but_not_a_waiting_event(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD)
    with passes(str(log)) as run:
        run.poll()
        append(log, POOL)
        run.poll()  # the pool waits for a later line: the mark stays before it
        (mark,) = run.follower.state(12).files
        assert (mark.line, mark.offset) == (1, len(LOAD))
        append(log, SIZED)
        run.poll()
        state = run.follower.state(34)
    status = log.stat()
    assert state == FollowState(
        (FileMark(str(log), status.st_dev, status.st_ino, 3, status.st_size, digest(LOAD.encode()[:64]), 64),),
        None,
        34,
    )


def test_a_restart_stopped_before_its_first_pass_keeps_the_old_marks(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL + SIZED)
    with passes(str(log)) as first:
        first.poll()
        saved = first.follower.state(None)
    with passes(str(log), state=saved) as restart:
        restart.tailer.adopt(str(log), restart.follower)  # opened, not read yet
        assert restart.follower.state(None) == saved


def test_a_restart_stopped_before_its_first_pass_keeps_the_old_marks_of_every_file(tmp_path: Path) -> None:
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    for log in logs:
        log.write_text(LOAD + POOL + SIZED)
    with passes(str(tmp_path / "*.log")) as first:
        first.poll()
        saved = first.follower.state(None)
    assert len(saved.files) == 2
    with passes(str(tmp_path / "*.log"), state=saved) as restart:
        for log in logs:
            restart.tailer.adopt(str(log), restart.follower)  # opened, not read yet
        assert set(restart.follower.state(None).files) == set(saved.files)


@pytest.mark.parametrize("how", ["truncated", "rewritten"])
def test_a_file_changed_while_not_followed_is_read_from_its_start(tmp_path: Path, how: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL + SIZED)
    with passes(str(log)) as first:
        first.poll()
        saved = first.follower.state(None)
    with log.open("r+b") as stream:  # the same inode: truncated, or its first bytes written anew
        if how == "truncated":
            stream.truncate(len(LOAD))
        else:
            stream.write(LOAD.replace("70.00", "71.00").encode())
    with passes(str(log), state=saved) as restart:
        restart.poll()
    assert restart.events() == migrated(log)
    assert restart.notices == [f"{log}: changed while it was not followed (truncated or replaced): read from its start"]


def test_marks_of_files_not_followed_now_are_kept_while_the_file_is_there(tmp_path: Path) -> None:
    kept, deleted, replaced, followed = (tmp_path / name for name in ("kept.log", "gone.log", "new.log", "now.log"))
    for path in (kept, deleted, replaced, followed):
        path.write_text(LOAD)
    with passes([str(kept), str(deleted), str(replaced)]) as first:
        first.poll()
        saved = first.follower.state(None)
    deleted.unlink()
    replaced.rename(tmp_path / "new.log.1")
    replaced.write_text(LOAD)  # another file at the name
    with passes(str(followed), state=saved) as restart:
        restart.poll()
        marks = restart.follower.state(None).files
    assert [mark.path for mark in marks] == [str(followed), str(kept)]


def test_a_file_renamed_away_is_read_to_its_end_and_its_last_line_without_a_newline(tmp_path: Path) -> None:
    log, rotated = tmp_path / "server.log", tmp_path / "server.log.1"
    log.write_text(LOAD + POOL)
    with passes(str(log), drain_s=0.0) as run:
        run.poll()
        log.rename(rotated)
        append(rotated, LOAD.replace("TP0", "TP1") + POOL.replace("TP0", "TP1").rstrip("\n"))
        run.poll()  # its last line ends the file: its pool waits for nothing more
        assert run.follower.state(None).files == ()  # closed: nothing left to mark
    rotated.rename(log)  # its events name the file as it was found
    assert run.events() == migrated(log)


def test_a_log_that_cannot_be_opened_is_said(tmp_path: Path) -> None:
    with passes(str(tmp_path)) as run:
        run.follower.unreadable(str(tmp_path / "secret.log"), "Permission denied")
    assert run.notices == [
        f"{tmp_path / 'secret.log'}: cannot open: Permission denied; not followed until it can be read"
    ]


def test_the_events_file_is_held_by_one_follower_and_cut_back_to_a_size(tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    out.write_bytes(b"0123456789")
    output = EventOutput(str(out), io.BytesIO())
    try:
        assert output.name == str(out)
        assert output.identity == (out.stat().st_dev, out.stat().st_ino)
        with pytest.raises(OutputError, match="^" + re.escape(f"{out}: another kvlog follow writes to this file")):
            EventOutput(str(out), io.BytesIO())
        assert output.cut_to(11) is False  # shorter than that: nothing cut
        assert output.cut_to(10) is True
        assert out.read_bytes() == b"0123456789"
        assert output.cut_to(4)
        assert out.read_bytes() == b"0123"
        output.write(b'{"event": "x"}\n')
        assert output.commit() == 4 + 15
    finally:
        output.close()
    EventOutput(str(out), io.BytesIO()).close()  # free again once closed


def test_events_on_standard_output_or_a_device_have_no_size_to_record(tmp_path: Path) -> None:
    stdout = io.BytesIO()
    for name in (None, "-"):
        output = EventOutput(name, stdout)
        assert (output.name, output.path, output.identity) == (name or "standard output", None, (None, None))
        assert output.cut_to(5)
        output.write(b"line\n")
        assert output.commit() is None
        output.close()
    assert stdout.getvalue() == b"line\nline\n"
    devices = [EventOutput(os.devnull, stdout) for _ in range(2)]  # a device is shared, never locked
    assert devices[0].commit() is None
    for output in devices:
        output.close()


def test_an_events_file_that_cannot_be_opened_says_why(tmp_path: Path) -> None:
    with pytest.raises(OutputError) as raised:
        EventOutput(str(tmp_path), io.BytesIO())
    assert str(raised.value) == f"{tmp_path}: cannot open: Is a directory"


@pytest.mark.parametrize("cut", ["at a line's end", "inside a line"])
def test_new_only_lines_written_before_the_first_read_are_written_from_the_start_size_on(
    tmp_path: Path, cut: str
) -> None:
    """Opened, then grown before its first read: one piece spans the start size, which splits it."""
    log = tmp_path / "server.log"
    before = corpus_text("gen2_2025.log")
    half = "" if cut == "at a line's end" else LOAD[:20]
    log.write_text(before + half)
    with passes(str(log), new_only=True) as run:
        run.tailer.adopt(str(log), run.follower)  # the start size is taken here
        append(log, LOAD[len(half) :] + POOL + SIZED)
        run.poll()
    events = migrated(log)[events_of(tmp_path, before) :]
    assert run.events() == (events if cut == "at a line's end" else events[1:])  # a line begun before: quiet
    assert run.follower.written == len(run.events())


def test_a_log_truncated_while_an_event_waits_writes_it_before_reading_the_log_again(tmp_path: Path) -> None:
    """copytruncate: the old content ends as a file ends, its waiting pool written as it stands, not lost."""
    log = tmp_path / "server.log"
    log.write_text(LOAD + POOL)
    with passes(str(log)) as run:
        run.poll()  # the pool waits for its evidence
        log.write_text(LOAD)
        run.poll()
    assert [orjson.loads(line)["event"] for line in run.events()] == [
        "weights.load_begin",
        "kv_pool.allocation",
        "weights.load_begin",
    ]
    assert run.notices == [f"{log}: truncated (rotated by copytruncate?): following it from its start"]


def test_new_only_counts_an_empty_first_line_among_the_lines_there_at_the_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n" + LOAD)
    with passes(str(log), new_only=True) as run:
        run.tailer.adopt(str(log), run.follower)  # the start size is taken here
        append(log, POOL + SIZED)
        run.poll()
    assert run.events() == migrated(log)[1:]


def test_new_only_writes_an_event_held_across_passes_after_the_start(tmp_path: Path) -> None:
    """Once past the start size, no later piece makes an earlier line quiet: a pool released later is written."""
    log = tmp_path / "server.log"
    log.write_text(LOAD)
    with passes(str(log), new_only=True) as run:
        run.poll()  # the start: quiet
        append(log, POOL)
        run.poll()  # the pool waits for its evidence
        append(log, SIZED)
        run.poll()
    assert run.events() == migrated(log)[1:]
    assert allocation_rule(run.events()[0]) == "post-capture-after-pool"


def test_without_a_state_the_follower_keeps_no_piece_once_its_events_are_written(tmp_path: Path) -> None:
    """A follower runs for weeks: what it keeps per piece read (for a state's mark) goes once the piece is written."""
    log = tmp_path / "server.log"
    log.write_text(LOAD)
    with passes(str(log)) as run:
        for _ in range(3):
            run.poll()
            append(log, LOAD)
        assert [len(followed.ends) for followed in run.follower._files.values()] == [0]


def test_a_notice_quotes_at_most_200_characters_of_its_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    long = UNREAD.strip() + " x" * 200
    log.write_text(long + "\n")
    with passes(str(log)) as run:
        run.poll()
    (notice,) = run.notices
    assert notice.startswith(f"{log}:1: looks like a memory line")
    assert notice.endswith(f": {long[:200]}")


@pytest.mark.parametrize(
    ("data", "position", "end"),
    [
        (b"ab\ncd", 0, 0),  # the start size at the piece's start: nothing before it
        (b"ab\ncd", -2, 0),  # the piece starts after the start size
        (b"ab\ncd\n", 1, 3),  # inside the first line: its end
        (b"ab\ncd\n", 3, 3),  # on a newline: there
        (b"ab\ncd\n", 4, 6),
        (b"ab\ncd\n", 6, 6),  # the piece's last byte
        (b"ab\ncd\n", 7, None),  # past the piece
        (b"ab\ncd", 4, None),  # in a line the piece does not end
    ],
)
def test_new_only_splits_a_piece_at_the_end_of_the_line_holding_the_start_sizes_last_byte(
    data: bytes, position: int, end: int | None
) -> None:
    """The lines up to that end were (at least partly) there at the start: quiet; the rest are new."""
    assert _line_end_at_or_after(data, position) == end
