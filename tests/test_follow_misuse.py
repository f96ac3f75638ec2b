"""``kvlog follow`` where users get it wrong or files misbehave: its own output in a pattern, a state in use or
unwritable, a state whose output was cut back, values no wait can use, a log it may not read."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from cli_harness import SCRIPT
from follow_helpers import RUN_END, append, corpus_text, following, lines_of, migrated, wait_for

from kvlog.commands._migrate import migrator_for
from kvlog.follow.follower import EventOutput, Follower
from kvlog.io.tailing import READ_BYTES, Source, Tailer
from kvlog.migration.candidates import MAX_LINE_BYTES
from kvlog.migration.engine import MigrateOptions

KVLOG = str(SCRIPT)
#: a memory-like line no rule reads: a dead letter, said on standard error
UNREAD = "[2026-07-21 09:00:02 TP0] KV Cache is allocated. something new: 12.5 GB\n"


def run_cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([KVLOG, "follow", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def refused(*args: str) -> tuple[int, str]:
    """A follower expected to stop at once: its exit status and standard error (killed if it runs on)."""
    process = run_cli(*args)
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    return process.returncode, stderr.decode()


def saved(state: Path) -> dict[str, object]:
    document: dict[str, object] = orjson.loads(state.read_bytes())
    return document


def followed_to_the_end(tmp_path: Path) -> tuple[Path, Path, Path, list[bytes]]:
    """A log followed with a state until every event is written and the state counts them: log, output, state."""
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    expected = migrated(log)
    with following(str(log), out, state=state) as run:
        run.wait_events(len(expected))
        wait_for(lambda: saved(state)["output_size"] == out.stat().st_size, what="the state")
    return log, out, state, expected


@pytest.mark.parametrize("named", ["a pattern", "the directory"])
def test_a_pattern_naming_the_output_and_the_state_does_not_follow_them(tmp_path: Path, named: str) -> None:
    """``kvlog follow 'logs/*' -o logs/events.jsonl``: reading its own events would feed it forever."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log, out, state = logs / "server.log", logs / "events.jsonl", logs / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    expected = migrated(log)
    pattern = str(logs / "*") if named == "a pattern" else str(logs)
    with following(pattern, out, state=state) as run:
        run.wait_events(len(expected))
        append(log, "an ordinary line\n")  # a few more passes and state saves
        lines = len(log.read_text().splitlines())
        wait_for(lambda: [mark["line"] for mark in saved(state)["files"]] == [lines], what="the state")  # type: ignore[attr-defined]
        time.sleep(1.5)
    assert lines_of(out) == expected
    assert [mark["path"] for mark in saved(state)["files"]] == [str(log)]  # type: ignore[attr-defined]
    assert not any("events.jsonl" in notice or "state.json" in notice for notice in run.notices)


@pytest.mark.parametrize("rotation", ["renamed", "linked"])
def test_the_output_and_the_state_renamed_or_linked_into_the_pattern_are_never_read(
    tmp_path: Path, rotation: str
) -> None:
    """logrotate renames the output (the follower writes on in the open file), or a link names it: never read.

    Read, its own events would be written again, and read again, until the disk is full. The output
    and the state are known by device and inode (the state a new file at each save), not by name.
    """
    logs = tmp_path / "logs"
    logs.mkdir()
    log, out, state = logs / "server.log", logs / "events.jsonl", logs / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    moved = [own.with_name(own.name + ".1") for own in (out, state)]
    written = moved[0] if rotation == "renamed" else out
    with following(str(logs / "*"), out, state=state) as run:
        run.wait_events(len(migrated(log)))
        for own, new_name in zip((out, state), moved, strict=True):
            if rotation == "renamed":
                own.rename(new_name)
            else:
                os.link(own, new_name)
        for more in ("gen3_dtype_2026.log", "hybrid_swa_2026.log"):  # passes after: a read would have written again
            append(log, corpus_text(more))
            wait_for(lambda: len(lines_of(written)) >= len(migrated(log)), what="the appended events")
        wait_for(lambda: [mark["line"] for mark in saved(state)["files"]] == [len(log.read_text().splitlines())])  # type: ignore[attr-defined]
    assert lines_of(written) == migrated(log)
    assert [mark["path"] for mark in saved(state)["files"]] == [str(log)]  # type: ignore[attr-defined]
    said = [f"{name}: written by this kvlog follow (its events, state or messages): not read" for name in moved]
    assert sorted(notice for notice in run.notices if "written by this kvlog follow" in notice) == sorted(said)


def test_standard_output_and_error_redirected_into_the_pattern_are_never_read(tmp_path: Path) -> None:
    """``kvlog follow 'logs/*' > logs/events.jsonl 2> logs/follow.err``, then the files rotated and linked.

    Standard error carries the dead letters (each unparsed memory line, quoted): read back, each would be
    a dead letter again, without end.
    """
    logs = tmp_path / "logs"
    logs.mkdir()
    log, out, err = logs / "server.log", logs / "events.jsonl", logs / "follow.err"
    log.write_text(corpus_text("gen2_2025.log") + UNREAD)
    command = [KVLOG, "follow", str(logs / "*"), "--state", str(tmp_path / "state.json")]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr)
    try:
        wait_for(lambda: len(lines_of(out)) >= len(migrated(log)), what="the events")
        out.rename(logs / "events.jsonl.1")
        os.link(err, logs / "follow.err.1")
        for more in ("gen3_dtype_2026.log", "hybrid_swa_2026.log"):  # passes after: a read would have written again
            append(log, corpus_text(more) + UNREAD)
            wait_for(lambda: len(lines_of(logs / "events.jsonl.1")) >= len(migrated(log)), what="appended events")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    assert lines_of(logs / "events.jsonl.1") == migrated(log)
    dead = [line for line in err.read_text().splitlines() if "looks like a memory line" in line]
    assert len(dead) == 3  # one for each unparsed line of the log, none for a notice read back
    said = sorted(line for line in err.read_text().splitlines() if "written by this kvlog follow" in line)
    assert said == sorted(
        f"kvlog follow: {logs / name}: written by this kvlog follow (its events, state or messages): not read"
        for name in ("events.jsonl", "events.jsonl.1", "follow.err", "follow.err.1")
    )


def test_a_state_cut_back_is_recorded_at_the_size_the_output_has(tmp_path: Path) -> None:
    """A restart cuts the output back; the size it then records is the output's, not where the old end was.

    Otherwise the next restart finds the output "shorter than the state says", cuts nothing, and what a kill
    left half-written after the state stays in the output for good.
    """
    log, out, state, expected = followed_to_the_end(tmp_path)
    for _ in range(2):  # killed while writing an event after the state was saved, twice
        append(out, b'{"event": "kv_pool.allocation", "half')
        with following(str(log), out, state=state):
            wait_for(lambda: out.stat().st_size == saved(state)["output_size"], what="the output cut back")
        assert saved(state)["output_size"] == out.stat().st_size
    assert lines_of(out) == expected


def test_a_state_that_cannot_be_saved_stops_the_run_before_an_event_is_written(tmp_path: Path) -> None:
    """Events written while their state cannot be saved would all be written again by the restart."""
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(corpus_text("gen2_2025.log"))
    state = tmp_path / "missing" / "state.json"
    status, stderr = refused(str(log), "-o", str(out), "--state", str(state))
    assert status == 2
    assert stderr.startswith(f"kvlog follow: {state}: cannot ")
    assert "No such file or directory" in stderr
    assert "Traceback" not in stderr
    assert lines_of(out) == []


def test_a_second_follower_on_the_same_state_is_refused(tmp_path: Path) -> None:
    """Two followers on one state would each write the events and overwrite each other's marks."""
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    first = run_cli(str(log), "-o", str(tmp_path / "a.jsonl"), "--state", str(state))
    try:
        wait_for(state.exists, what="the first follower's state")
        status, stderr = refused(str(log), "-o", str(tmp_path / "b.jsonl"), "--state", str(state))
        assert status == 2
        assert f"kvlog follow: {state}: another kvlog follow uses this state" in stderr
        assert lines_of(tmp_path / "b.jsonl") == []
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 0
    # once the first has stopped, the state is free again: the third saves it (each save is a new file)
    before = state.stat().st_ino
    third = run_cli(str(log), "-o", str(tmp_path / "a.jsonl"), "--state", str(state))
    wait_for(lambda: third.poll() is not None or state.stat().st_ino != before, what="the third follower's state")
    third.send_signal(signal.SIGTERM)
    _, stderr = third.communicate(timeout=30)
    assert third.returncode == 0, stderr


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--poll", "inf"), "--poll inf"),
        (("--poll", "nan"), "--poll nan"),
        (("--hold", "nan"), "--hold nan"),
        (("--hold", "inf"), "--hold inf"),
    ],
)
def test_waits_no_clock_can_keep_are_refused(tmp_path: Path, args: tuple[str, ...], reason: str) -> None:
    """``--poll inf`` ended in a traceback from the wait; ``--hold nan`` held every event for ever."""
    log = tmp_path / "x.log"
    log.touch()
    status, stderr = refused(str(log), "-o", os.devnull, *args)
    assert status == 2
    assert reason in stderr
    assert "Traceback" not in stderr


def test_a_file_larger_than_one_pass_is_read_on_without_waiting_for_news(tmp_path: Path) -> None:
    """A file written before the start sends no news: the passes that catch up on it must not wait for any."""
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    with log.open("w") as stream:
        filler = "an ordinary line, not about memory\n"
        stream.write(filler * (3 * READ_BYTES // len(filler)))
        stream.write(corpus_text("gen2_2025.log"))
    expected = migrated(log)
    with following(str(log), out, poll_s=300) as run:  # a wait would be 300 s
        assert run.wait_events(len(expected)) == expected


def test_a_log_that_cannot_be_read_is_said_once_not_skipped_in_silence(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file (and the virtual environment may be root's alone)")
    secret, public = tmp_path / "secret.log", tmp_path / "public.log"
    secret.write_text(corpus_text("gen2_2025.log"))
    secret.chmod(0)
    public.write_text(RUN_END)
    process = run_cli(str(tmp_path / "*.log"), "-o", os.devnull)
    time.sleep(3)  # a few passes: the notice is said once, not at each
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    notices = [line for line in stderr.decode().splitlines() if "secret.log" in line]
    assert notices == [f"kvlog follow: {secret}: cannot open: Permission denied; not followed until it can be read"]
    assert "Traceback" not in stderr.decode()


def test_a_state_whose_events_went_elsewhere_says_so(tmp_path: Path) -> None:
    """The state counts events written to standard output: a restart into a file must not leave it empty in silence."""
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    with following(str(log), tmp_path / "first.jsonl", state=state) as run:
        run.wait_events(len(migrated(log)))
    with following(str(log), out, state=state) as run:
        wait_for(lambda: bool(run.notices), what="a notice")
    assert run.notices == [
        f"{out}: the state counts the events written to {tmp_path / 'first.jsonl'}; only later ones are written here"
    ]
    assert lines_of(out) == []


def test_a_state_entry_without_a_field_names_the_field(tmp_path: Path) -> None:
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.touch()
    state.write_text('{"format": "kvlog-follow-state", "version": 1, "files": [{"path": "x.log"}]}')
    status, stderr = refused(str(log), "--state", str(state))
    assert status == 2
    assert stderr == (
        f"kvlog follow: {state}: cannot use the state: a file entry has no device, inode, line, offset, head_sha256, "
        "head_bytes; remove it to follow from the start\n"
    )


def test_following_without_a_state_keeps_no_record_per_read(tmp_path: Path) -> None:
    """What a state would mark is dropped as the lines are written, state or not: memory does not grow with time."""
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.touch()
    output = EventOutput(str(out), io.BytesIO())
    follower = Follower(migrator_for(None, MigrateOptions(only_events=True)), output, clock=time.monotonic)
    tailer = Tailer((str(log),), max_line_bytes=MAX_LINE_BYTES)
    for _ in range(200):
        append(log, "an ordinary line\n")
        tailer.poll(follower)
    tailer.close()
    output.close()
    assert max(len(followed.ends) for followed in follower._files.values()) <= 1


class _Stopper:
    """A reader that asks the follower to stop as soon as it is handed lines."""

    def __init__(self) -> None:
        self.stop = False
        self.read = 0

    def opened(self, source: Source) -> None:
        pass

    def lines(self, source: Source, data: bytes, end: int) -> None:
        self.read += len(data)
        self.stop = True

    def truncated(self, source: Source) -> None:
        pass

    def closed(self, source: Source) -> None:
        pass

    def unreadable(self, path: str, reason: str) -> None:
        pass


def test_a_stop_during_a_pass_over_a_large_file_reads_no_further(tmp_path: Path) -> None:
    """SIGTERM during a restart's re-read waited for a pass of 4 MiB per file (seconds each) before it stopped."""
    log = tmp_path / "server.log"
    log.write_bytes(b"an ordinary line\n" * (READ_BYTES // 17 + 1))
    tailer, reader = Tailer((str(log),), max_line_bytes=MAX_LINE_BYTES), _Stopper()
    assert tailer.poll(reader, lambda: reader.stop)
    tailer.close()
    assert 0 < reader.read <= 1 << 20  # one read of the pass, not the pass


def test_a_notice_quotes_a_line_without_its_control_bytes(tmp_path: Path) -> None:
    """A log line's escape sequences reach the operator's terminal in a notice: they are shown, not obeyed."""
    log = tmp_path / "server.log"
    log.write_bytes(b"[2026-07-21 09:00:01 TP0] KV Cache is allocated. \x1b[2J\x00 #tokens: 1000\n")
    with following(str(log), tmp_path / "events.jsonl") as run:
        wait_for(lambda: bool(run.notices), what="a notice")
    assert run.notices[0].startswith(f"{log}:1: looks like a memory line")
    assert run.notices[0].endswith("allocated. \\x1b[2J\\x00 #tokens: 1000")


def test_an_output_replaced_between_runs_is_not_cut_back(tmp_path: Path) -> None:
    """The state's size is that of the file it counted events in: another file under the name is not cut to it."""
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    with following(str(log), out, state=state) as run:
        run.wait_events(len(migrated(log)))
    out.rename(tmp_path / "events.jsonl.1")  # archived, and another file took its name
    other = b'{"kept": "every byte of a file kvlog never wrote"}\n' * 4000
    out.write_bytes(other)
    with following(str(log), out, state=state) as run:
        wait_for(lambda: bool(run.notices), what="a notice")
    assert out.read_bytes() == other
    assert run.notices == [
        f"{out}: not the file the state counted events in (replaced?): nothing cut; "
        f"the events it counts are not written again"
    ]


def test_a_second_follower_writing_the_same_output_is_refused(tmp_path: Path) -> None:
    """Two followers appending to one file interleave their lines, and a restart of one cuts the other's events."""
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(corpus_text("gen2_2025.log"))
    first = run_cli(str(log), "-o", str(out), "--state", str(tmp_path / "a.json"))
    try:
        wait_for((tmp_path / "a.json").exists, what="the first follower's state")
        status, stderr = refused(str(log), "-o", str(out), "--state", str(tmp_path / "b.json"))
        assert status == 2
        assert stderr == f"kvlog follow: {out}: another kvlog follow writes to this file\n"
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 0
    assert lines_of(out) == migrated(log)[: len(lines_of(out))]


def test_a_file_the_patterns_no_longer_name_is_not_followed_after_a_restart(tmp_path: Path) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    out, state = tmp_path / "events.jsonl", tmp_path / "state.json"
    first.write_text(corpus_text("gen2_2025.log"))
    second.write_text(corpus_text("gen3_dtype_2026.log"))
    with following([str(first), str(second)], out, state=state) as run:
        run.wait_events(len(migrated(first)) + len(migrated(second)))
    written = len(lines_of(out))
    append(second, corpus_text("hybrid_swa_2026.log"))  # b.log grows while the follower is down
    with following(str(first), out, state=state) as run:  # restarted on a.log alone
        wait_for(lambda: any("no pattern names it" in notice for notice in run.notices), what="the notice")
        time.sleep(0.3)
    assert len(lines_of(out)) == written
    assert f"{second}: no pattern names it any more: not followed" in run.notices


def test_a_restart_stopped_before_it_read_its_files_again_keeps_their_marks(tmp_path: Path) -> None:
    """Stopped at once (SIGTERM right after start), a restart must still count what the first run wrote.

    Else its state says "no line written", and the next restart writes every event a second time.
    """
    log, out, state, expected = followed_to_the_end(tmp_path)
    marks = saved(state)["files"]
    for _ in range(2):
        with following(str(log), out, state=state) as run:
            run.stop.set()  # before its first pass has read a line
        assert saved(state)["files"] == marks
    with following(str(log), out, state=state) as run:
        wait_for(lambda: saved(state)["files"] == marks and len(run.notices) == 0, what="the state")
        time.sleep(0.5)
    assert lines_of(out) == expected


def test_a_file_of_the_state_the_patterns_leave_out_for_a_while_keeps_its_mark(tmp_path: Path) -> None:
    """Restarted on other patterns for a while, then on the old ones again: the old log is not written twice."""
    log, other = tmp_path / "server.log", tmp_path / "other.log"
    out, state = tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    other.write_text(corpus_text("gen3_dtype_2026.log"))
    expected, expected_other = migrated(log), migrated(other)
    with following(str(log), out, state=state) as run:
        run.wait_events(len(expected))
        wait_for(lambda: saved(state)["output_size"] == out.stat().st_size, what="the state")
    with following(str(other), out, state=state) as run:
        run.wait_events(len(expected) + len(expected_other))
        wait_for(lambda: saved(state)["output_size"] == out.stat().st_size, what="the state")
    assert any(f"{log}: no pattern names it any more" in notice for notice in run.notices)
    assert sorted(mark["path"] for mark in saved(state)["files"]) == [str(other), str(log)]  # type: ignore[attr-defined]
    with following(str(tmp_path / "*.log"), out, state=state):
        time.sleep(1.0)
    assert lines_of(out) == expected + expected_other
