"""``kvlog follow``'s passes, driven one by one through the library: what each pass writes, and what it leaves quiet."""

from __future__ import annotations

from pathlib import Path

from follow_helpers import append, corpus_text, migrated, passes

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
