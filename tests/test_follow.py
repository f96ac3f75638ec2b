"""``kvlog follow``: live logs give the events ``kvlog migrate`` gives, across rotation, truncation and new files."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import os
import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import SCRIPT
from follow_helpers import DATED_LOGS, RUN_END, append, corpus_text, following, lines_of, migrated, wait_for
from process_helpers import catches, holds_open

from kvlog.follow.stall import queued_bytes
from kvlog.follow.state import FollowState, save
from kvlog.io.tailing import Source, Tailer
from kvlog.migration.candidates import MAX_LINE_BYTES

POOL = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 9.00 GB, V size: 9.00 GB"
LOAD = "[2026-07-21 09:00:00 TP0] Load weight begin. avail mem=70.00 GB"
SIZED = "Post-capture KV sizing: max_total_num_tokens=800, free memory=3.00 GB"
KVLOG = [str(SCRIPT)]


def without_file(lines: list[bytes]) -> list[dict[str, Any]]:
    """Events with the name of the file they came from left out (a rotated file is read under its old name)."""
    events = [orjson.loads(line) for line in lines]
    for event in events:
        event["migrated"].pop("file", None)
    return events


def write_in_pieces(path: Path, text: str, seed: int) -> None:
    """``text`` appended in random pieces, some ending inside a line, as a server's buffered writes do."""
    data, rng, at = text.encode(), random.Random(seed), 0
    while at < len(data):
        size = rng.randint(1, 400)
        append(path, data[at : at + size])
        at += size
        if rng.random() < 0.2:
            time.sleep(0.01)


@pytest.mark.parametrize("name", DATED_LOGS)
def test_a_log_written_while_followed_gives_the_events_migrate_gives(tmp_path: Path, name: str) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.touch()
    with following(str(log), out) as run:
        write_in_pieces(log, corpus_text(name), seed=len(name))
        expected = migrated(log)
        assert run.wait_events(len(expected)) == expected
        time.sleep(0.3)
    assert lines_of(out) == expected


def test_every_rank_file_and_new_files_matching_a_pattern(tmp_path: Path) -> None:
    logs, out = tmp_path / "logs", tmp_path / "events.jsonl"
    logs.mkdir()
    first, second = logs / "tp0.log", logs / "tp1.log"
    first.write_text(corpus_text("gen2_2025.log"))
    with following(str(logs / "*.log"), out) as run:
        run.wait_events(len(migrated(first)))
        second.write_text(corpus_text("hybrid_swa_2026.log"))
        (logs / "tp1.log.gz").write_bytes(b"not followed: a finished rotation")
        expected = migrated(first) + migrated(second)
        run.wait_events(len(expected))
    assert sorted(lines_of(out)) == sorted(expected)
    assert {event["migrated"]["file"] for event in run.decoded()} == {str(first), str(second)}


def test_a_directory_is_followed_with_the_files_created_in_it(tmp_path: Path) -> None:
    logs, out = tmp_path / "logs", tmp_path / "events.jsonl"
    logs.mkdir()
    with following(str(logs), out) as run:
        time.sleep(0.2)
        (logs / "late.log").write_text(corpus_text("gen3_dtype_2026.log"))
        expected = migrated(logs / "late.log")
        assert run.wait_events(len(expected)) == expected


def test_rotation_by_rename_keeps_the_lines_written_to_the_old_file(tmp_path: Path) -> None:
    log, rotated, out = tmp_path / "server.log", tmp_path / "server.log.1", tmp_path / "events.jsonl"
    late, after = corpus_text("gen3_dtype_2026.log"), corpus_text("hybrid_swa_2026.log")
    log.write_text(corpus_text("gen2_2025.log"))
    with following(str(log), out) as run:
        run.wait_events(len(migrated(log)))
        log.rename(rotated)
        append(rotated, late)  # the server writes on to the file it has open, then reopens
        log.write_text(after)
        expected = without_file(migrated(rotated)) + without_file(migrated(log))
        run.wait_events(len(expected))
    assert without_file(lines_of(out)) == expected


def test_rotation_by_copytruncate_reads_the_file_again_from_its_start(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(corpus_text("postcapture_after_fix_2026_09.log"))
    first = migrated(log)
    with following(str(log), out) as run:
        run.wait_events(len(first))
        shutil.copy(log, tmp_path / "server.log.1")
        with log.open("r+b") as stream:
            stream.truncate(0)
        append(log, corpus_text("gen3_dtype_2026.log"))
        expected = first + migrated(log)
        run.wait_events(len(expected))
        time.sleep(0.3)
    assert lines_of(out) == expected
    assert any("truncated" in notice for notice in run.notices)


def test_a_file_deleted_and_recreated_is_a_new_file(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(corpus_text("gen2_2025.log"))
    first = migrated(log)
    with following(str(log), out) as run:
        run.wait_events(len(first))
        log.unlink()
        time.sleep(0.2)
        log.write_text(corpus_text("hybrid_swa_2026.log"))  # tmpfs and ext4 may give it the old inode number
        expected = first + migrated(log)
        run.wait_events(len(expected))
        time.sleep(0.3)
    assert lines_of(out) == expected


def test_a_truncated_file_rewritten_past_the_old_offset_is_read_from_its_start(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(corpus_text("gen2_2025.log"))
    first = migrated(log)
    with following(str(log), out, poll_s=0.2) as run:
        run.wait_events(len(first))
        longer = corpus_text("postcapture_before_fix_2026_07.log", "gen3_dtype_2026.log")
        log.write_text(longer)  # truncated and written beyond the old size between two polls
        expected = first + migrated(log)
        run.wait_events(len(expected))
    assert lines_of(out) == expected


def test_an_event_waits_for_its_evidence_only_for_the_hold(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(f"{LOAD}\n[2026-07-21 09:00:01 TP0] {POOL}\n")
    with following(str(log), out, hold_s=0.5) as run:
        events = run.wait_events(2, timeout=10)
        pool = orjson.loads(events[1])
        assert pool["allocation_state"] == "allocated"
        inferred = pool["migrated"]["inferred"]["allocation_state"]
        assert inferred["rule"] == "look-ahead-exhausted"
        assert "0.5 s" in inferred["evidence"]


def test_evidence_within_the_hold_settles_the_state(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(f"{LOAD}\n[2026-07-21 09:00:01 TP0] {POOL}\n")
    with following(str(log), out, hold_s=60) as run:
        run.wait_events(1)
        time.sleep(0.5)
        assert len(run.events()) == 1  # the pool waits for a later line
        append(log, f"[2026-07-21 09:01:00 TP0] {SIZED}\n")
        pool = orjson.loads(run.wait_events(3)[1])
    assert pool["allocation_state"] == "va_upper_bound"
    assert pool["migrated"]["inferred"]["allocation_state"]["rule"] == "post-capture-after-pool"


def test_new_only_writes_the_events_of_lines_written_after_the_start(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(corpus_text("gen2_2025.log"))
    old = len(migrated(log))
    with following(str(log), out, new_only=True) as run:
        time.sleep(0.5)
        assert run.events() == []
        append(log, corpus_text("hybrid_swa_2026.log"))
        expected = migrated(log)[old:]
        assert run.wait_events(len(expected)) == expected


def test_an_unparsed_memory_line_is_said_with_its_file_and_line(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text("[2026-07-21 09:00:00 TP0] KV Cache is allocated. something new: 12.5 GB\n")
    with following(str(log), out) as run:
        wait_for(lambda: bool(run.notices), what="a notice")
    assert run.notices[0].startswith(f"{log}:1: looks like a memory line")


def test_waits_use_inotify_unless_polling_is_asked_for(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.touch()
    with following(str(log), tmp_path / "a.jsonl") as run:
        time.sleep(0.3)
    assert run.outcome.inotify
    with following(str(log), tmp_path / "b.jsonl", poll_s=0.1) as polled:
        time.sleep(0.3)
    assert not polled.outcome.inotify


class _Recorder:
    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.ends: list[int] = []
        self.most_pending = 0

    def opened(self, source: Source) -> None:
        pass

    def lines(self, source: Source, data: bytes, end: int) -> None:
        self.pieces.append(data)
        self.ends.append(end)

    def truncated(self, source: Source) -> None:
        pass

    def closed(self, source: Source) -> None:
        pass


def test_memory_stays_bounded_whatever_the_line_length(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.touch()
    tailer, recorder = Tailer((str(log),), max_line_bytes=MAX_LINE_BYTES), _Recorder()
    tailer.poll(recorder)
    for _ in range(40):  # a 40 MiB line arriving over many polls
        append(log, b"x" * (1 << 20))
        tailer.poll(recorder)
        recorder.most_pending = max(recorder.most_pending, *(len(s.partial) for s in tailer.sources))
    append(log, b"\n" + RUN_END.encode())
    tailer.poll(recorder)
    tailer.close()
    assert recorder.most_pending <= MAX_LINE_BYTES
    assert b"".join(recorder.pieces) == b"\n" + RUN_END.encode()  # the long line, as an empty one, then the next
    assert recorder.ends == [(40 << 20) + 1, log.stat().st_size]  # where each ends in the file


def run_cli(*args: str, **popen: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*KVLOG, "follow", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def test_sigterm_flushes_saves_the_state_and_exits_0(tmp_path: Path) -> None:
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    expected = migrated(log)
    process = run_cli(str(log), "--state", str(state))
    assert process.stdout is not None
    written = [process.stdout.readline().rstrip(b"\n") for _ in expected]  # a stop before a pass reads nothing
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert written + stdout.splitlines() == expected
    assert f"stopped; {len(expected)} events written" in stderr.decode()
    assert orjson.loads(state.read_bytes())["files"][0]["line"] == len(log.read_text().splitlines())


def test_a_state_file_that_is_not_one_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.touch()
    state.write_text('{"files": []}')
    process = run_cli(str(log), "--state", str(state))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert stderr.decode().startswith(f"kvlog follow: {state}: cannot use the state: not a kvlog follow state")
    assert "Traceback" not in stderr.decode()


@pytest.mark.parametrize(("args", "reason"), [(("--hold", "0"), "--hold 0"), (("--poll", "-1"), "--poll -1")])
def test_options_that_cannot_work_are_refused(tmp_path: Path, args: tuple[str, ...], reason: str) -> None:
    process = run_cli(str(tmp_path / "x.log"), *args)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert reason in stderr.decode()


def test_a_missing_log_is_waited_for(tmp_path: Path) -> None:
    log, out = tmp_path / "later" / "server.log", tmp_path / "events.jsonl"
    with following(str(log), out) as run:
        time.sleep(0.3)
        log.parent.mkdir()
        log.write_text(corpus_text("gen2_2025.log"))
        expected = migrated(log)
        assert run.wait_events(len(expected)) == expected


def test_idle_following_wakes_rarely(tmp_path: Path) -> None:
    """With inotify the follower sleeps between ticks: its CPU time while idle is a small part of the wall time."""
    log = tmp_path / "server.log"
    log.write_text(corpus_text("gen2_2025.log"))
    process = run_cli(str(log))
    wait_for(lambda: catches(process.pid, signal.SIGTERM) and holds_open(process.pid, log), what="start-up")
    time.sleep(0.5)  # the events of the log written out
    before = _cpu_seconds(process.pid)
    time.sleep(3)
    spent = _cpu_seconds(process.pid) - before
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert spent < 0.3, f"{spent:.3f} s of CPU in 3 s idle"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_without_a_state_a_stop_writes_what_still_waits(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(f"{LOAD}\n[2026-07-21 09:00:01 TP0] {POOL}\n")
    with following(str(log), out) as run:
        run.wait_events(1)
        time.sleep(0.3)
        assert len(run.events()) == 1  # the pool waits for a later line
    assert lines_of(out) == migrated(log)  # written at the stop, as migrate writes it at the end of the file


def test_with_a_state_a_stop_leaves_what_waits_to_the_restart(tmp_path: Path) -> None:
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(f"{LOAD}\n[2026-07-21 09:00:01 TP0] {POOL}\n")
    with following(str(log), out, state=state) as run:
        run.wait_events(1)
        wait_for(state.exists, what="the state")
    assert len(lines_of(out)) == 1
    append(log, f"[2026-07-21 09:01:00 TP0] {SIZED}\n")
    with following(str(log), out, state=state) as run:
        run.wait_events(3)
        time.sleep(0.3)
    pool = orjson.loads(lines_of(out)[1])
    assert pool["allocation_state"] == "va_upper_bound"  # the restart saw the evidence the stop did not wait for
    assert len(lines_of(out)) == 3


def test_new_only_restarted_with_its_state_writes_a_file_that_appeared_while_stopped_whole(tmp_path: Path) -> None:
    """The restart's start is not the follow's: a file the state has no mark of was not there when it began."""
    logs, out, state = tmp_path / "logs", tmp_path / "events.jsonl", tmp_path / "state.json"
    logs.mkdir()
    first, later = logs / "tp0.log", logs / "tp1.log"
    first.write_text(corpus_text("gen2_2025.log"))
    old = len(migrated(first))
    with following(str(logs / "*.log"), out, state=state, new_only=True) as run:
        wait_for(lambda: state.exists() and str(first) in state.read_text(), what="the state's mark of tp0.log")
        assert run.events() == []
    later.write_text(corpus_text("gen3_dtype_2026.log"))  # while nobody follows
    append(first, corpus_text("hybrid_swa_2026.log"))
    expected = Counter([*migrated(first)[old:], *migrated(later)])
    with following(str(logs / "*.log"), out, state=state, new_only=True) as run:
        run.wait_events(sum(expected.values()))
        time.sleep(0.3)
    assert Counter(lines_of(out)) == expected
    assert run.notices == [f"{later}: not in the state (new since the last run, or newly named): read from its start"]


@pytest.mark.parametrize("name", ["server.log.1.gz", "*.log.zst"])
def test_a_compressed_file_named_to_follow_is_said_not_to_be_followed(tmp_path: Path, name: str) -> None:
    (tmp_path / "server.log.1.gz").write_bytes(gzip.compress(corpus_text("gen2_2025.log").encode()))
    (tmp_path / "server.log.zst").write_bytes(b"(\xb5/\xfd")
    with following(str(tmp_path / name), tmp_path / "events.jsonl") as run:
        wait_for(lambda: bool(run.notices), what="a notice")
    assert run.events() == []
    assert run.notices == [
        f"{tmp_path / name}: compressed files are finished rotations, not followed (kvlog migrate reads them)"
    ]


def test_without_a_state_a_stop_says_the_last_line_it_leaves_unread_for_want_of_a_newline(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    unended = f"[2026-07-21 09:00:01 TP0] {POOL}"
    log.write_text(f"{LOAD}\n{unended}")
    with following(str(log), out) as run:
        run.wait_events(1)
        time.sleep(0.3)
    assert len(lines_of(out)) == 1  # the weights; the pool's line may be half-written
    assert run.notices == [
        f"{log}: its last {len(unended)} bytes end no line yet (still being written?): "
        "not read; kvlog migrate reads them as a line"
    ]


def test_a_stop_while_nobody_reads_the_events_ends_the_run_naming_why_and_the_restart_writes_the_rest(
    tmp_path: Path,
) -> None:
    """Writing to a full pipe blocks; a stop that waited for the write would wait for ever (or for SIGKILL)."""
    log, state, stderr = tmp_path / "server.log", tmp_path / "state.json", tmp_path / "stderr"
    log.write_text(corpus_text(*DATED_LOGS) * 8)
    expected = Counter(migrated(log))
    read_end, write_end = os.pipe()
    capacity = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    assert sum(map(len, expected.elements())) > 2 * capacity  # more events than the pipe holds
    with stderr.open("wb") as errors:
        process = subprocess.Popen([*KVLOG, "follow", str(log), "--state", str(state)], stdout=write_end, stderr=errors)
    os.close(write_end)
    try:
        wait_for(lambda: queued_bytes(read_end) > capacity // 2, what="the pipe to fill")
        time.sleep(0.5)  # the pipe's pages are full: the follower blocks in its write
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 2
        delivered = b""
        while chunk := os.read(read_end, 1 << 16):
            delivered += chunk
    finally:
        process.kill()
        os.close(read_end)
    assert stderr.read_text() == (
        "kvlog follow: standard output: its reader took no byte for 2 s after a stop: "
        "the events not yet written are dropped; a restart with the same --state writes them\n"
    )
    restart = run_cli(str(log), "--state", str(state))
    assert restart.stdout is not None
    written = Counter(delivered.splitlines()[:-1] if not delivered.endswith(b"\n") else delivered.splitlines())
    while not all(written[event] for event in expected):
        written[restart.stdout.readline().rstrip(b"\n")] += 1
    restart.send_signal(signal.SIGTERM)
    rest, _ = restart.communicate(timeout=30)
    written.update(rest.splitlines())
    assert set(written) - set(expected) <= {b""}  # no event but those of the log (a cut line is not one)
    assert restart.returncode == 0


def _full_pipe() -> tuple[int, int]:
    """A pipe (read end, write end) whose write end takes no byte more: nobody reads it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 4096)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x")
    os.set_blocking(write_end, True)
    return read_end, write_end


@pytest.mark.parametrize("stderr_too", [False, True])
def test_a_stop_finding_the_pipe_already_full_ends_the_run_when_its_last_write_stalls(
    tmp_path: Path, stderr_too: bool
) -> None:
    """Idle at the stop (the pool waits for a later line), the stop's own write of it blocks: that one too ends.

    With standard error on the same pipe (``2>&1``), the message would block as well: it is dropped, the exit
    status still says why.
    """
    log = tmp_path / "server.log"
    log.write_text(f"[2026-07-21 09:00:01 TP0] {POOL}\n")
    read_end, write_end = _full_pipe()
    errors = write_end if stderr_too else subprocess.PIPE
    process = subprocess.Popen([*KVLOG, "follow", str(log)], stdout=write_end, stderr=errors)
    os.close(write_end)
    try:
        wait_for(lambda: catches(process.pid, signal.SIGTERM) and holds_open(process.pid, log), what="the read")
        time.sleep(0.3)  # read, and the pool held: idle
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 2
        stderr = b"" if stderr_too else process.communicate(timeout=30)[1]
    finally:
        process.kill()
        os.close(read_end)
    if not stderr_too:
        assert stderr.decode() == (
            "kvlog follow: standard output: its reader took no byte for 2 s after a stop: "
            "the events not yet written are dropped\n"
        )


def test_a_stop_waits_for_a_reader_that_reads_slowly_and_loses_none_of_its_events(tmp_path: Path) -> None:
    """A reader taking 1 KB a second frees no whole page of the pipe for seconds: it is still reading."""
    log = tmp_path / "server.log"
    log.write_text(corpus_text(*DATED_LOGS) * 2)
    expected = b"".join(line + b"\n" for line in migrated(log))
    process = subprocess.Popen([*KVLOG, "follow", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    read_end = process.stdout.fileno()
    capacity = fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
    assert len(expected) > 2 * capacity
    delivered = b""
    try:
        wait_for(lambda: queued_bytes(read_end) > capacity // 2, what="the pipe to fill")
        process.send_signal(signal.SIGTERM)
        slow_until = time.monotonic() + 4.0  # twice the patience: a stall would be judged meanwhile
        while time.monotonic() < slow_until:
            delivered += os.read(read_end, 100)
            time.sleep(0.1)
        while chunk := os.read(read_end, 1 << 16):
            delivered += chunk
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert delivered == expected


def test_new_only_restarted_after_a_first_run_that_never_opened_its_files_starts_anew(tmp_path: Path) -> None:
    """A first run killed before its first pass saved marks leaves a state naming no file: not a restart's history."""
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.write_text(corpus_text("gen2_2025.log"))
    old = len(migrated(log))
    save(state, FollowState(files_opened=False))  # what a fresh run saves before its first pass
    with following(str(log), out, state=state, new_only=True) as run:
        wait_for(lambda: str(log) in state.read_text(), what="the state's mark of the log")
        assert run.events() == []
        append(log, corpus_text("hybrid_swa_2026.log"))
        expected = migrated(log)[old:]
        assert run.wait_events(len(expected)) == expected
    assert run.notices == []
