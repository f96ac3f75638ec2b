"""``kvlog follow`` over more files than the process may have descriptors: every file followed, none held for ever.

A directory of old rotations or a log per restart can hold more files than ``RLIMIT_NOFILE``. One
descriptor per file, for ever, made the next open anywhere fail (an import, a state's save): the
follower exited 2 having written no event. The tailer now holds at most ``max_open`` files open and
opens a closed one again, by identity, when it changes.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from collections import Counter
from pathlib import Path

from cli_harness import SCRIPT
from follow_helpers import append, canonical, corpus_text, lines_of, migrated, passes, wait_for

from kvlog.io.tailing import Tailer, descriptor_budget

KVLOG = str(SCRIPT)
LOGS = ("gen2_2025.log", "gen3_dtype_2026.log", "hybrid_swa_2026.log")


def open_files(tailer: Tailer) -> int:
    return sum(source.descriptor is not None for source in tailer.sources)


def events_of(scratch: Path, *texts: str) -> Counter[bytes]:
    """The events ``kvlog migrate`` makes of each text as a file of its own, names left out."""
    counted: Counter[bytes] = Counter()
    for text in texts:
        scratch.write_text(text)
        counted += canonical(migrated(scratch))
    return counted


def test_more_files_than_may_be_open_are_each_followed_through_rotation_truncation_and_deletion(
    tmp_path: Path,
) -> None:
    """Three open at most of twelve: each closed file is opened again when it changes, and read on where it was.

    Then, while closed: one rotated by rename (the old file gets the writer's last lines, a new one
    the name), one truncated and rewritten, one renamed to a name no pattern matches (found beside
    it and read to its end), one deleted.
    """
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    logs = [logs_dir / f"tp{rank}.log" for rank in range(12)]
    first = [corpus_text(LOGS[rank % 3]) for rank in range(12)]
    more = [corpus_text(LOGS[(rank + 1) % 3]) for rank in range(12)]
    for log, text in zip(logs, first, strict=True):
        log.write_text(text)
    with passes(str(logs_dir / "tp*"), max_open=3, drain_s=0.0) as run:
        run.poll()
        assert open_files(run.tailer) <= run.tailer.max_open
        for log, text in zip(logs, more, strict=True):
            append(log, text)
        run.poll()
        assert open_files(run.tailer) <= run.tailer.max_open
        logs[0].rename(logs_dir / "tp0.log.1")
        append(logs_dir / "tp0.log.1", corpus_text("gen2_2025.log"))
        logs[0].write_text(corpus_text("hybrid_swa_2026.log"))
        logs[1].write_text(corpus_text("gen3_dtype_2026.log"))  # copytruncate, then the server writes on
        logs[2].rename(logs_dir / "old-2.log")
        append(logs_dir / "old-2.log", corpus_text("gen3_dtype_2026.log"))
        logs[3].unlink()
        for _ in range(3):
            run.poll()
            assert open_files(run.tailer) <= run.tailer.max_open
    scratch = tmp_path / "scratch.log"
    expected = events_of(
        scratch,
        first[0] + more[0] + corpus_text("gen2_2025.log"),
        corpus_text("hybrid_swa_2026.log"),
        first[1] + more[1],
        corpus_text("gen3_dtype_2026.log"),
        first[2] + more[2] + corpus_text("gen3_dtype_2026.log"),
        *(first[rank] + more[rank] for rank in range(3, 12)),
    )
    assert canonical(run.events()) == expected
    assert run.notices == [f"{logs[1]}: truncated (rotated by copytruncate?): following it from its start"]


def limited(soft: int) -> None:
    """In the child before it runs: a real descriptor limit, as a server's unit file or ``ulimit -n`` sets."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, soft))


def test_ten_times_the_descriptor_limit_of_files_are_all_followed(tmp_path: Path) -> None:
    """``ulimit -n 64`` and 640 logs: every event is written, nothing fails to open, SIGTERM still saves and exits 0."""
    limit, logs_dir = 64, tmp_path / "logs"
    logs_dir.mkdir()
    text = corpus_text("gen3_dtype_2026.log")
    for number in range(limit * 10):
        (logs_dir / f"server-{number:04}.log").write_text(text)
    per_file = canonical(migrated(logs_dir / "server-0000.log"))
    expected = Counter({event: count * limit * 10 for event, count in per_file.items()})
    out, state = tmp_path / "events.jsonl", tmp_path / "state.json"
    command = [KVLOG, "follow", str(logs_dir), "-o", str(out), "--state", str(state)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, preexec_fn=lambda: limited(limit))  # noqa: PLW1509
    try:
        wait_for(lambda: len(lines_of(out)) >= sum(expected.values()), 120, "every file's events")
        append(logs_dir / "server-0000.log", text)  # a file closed long ago is read on when it changes
        expected += events_of(tmp_path / "scratch.log", text + text) - per_file
        wait_for(lambda: len(lines_of(out)) >= sum(expected.values()), 60, "the appended events")
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert canonical(lines_of(out)) == expected
    assert b"Too many open files" not in stderr
    assert b"Traceback" not in stderr


def test_the_budget_leaves_the_process_room_under_its_limit() -> None:
    """What the tailer may hold plus what is open now and a quarter of the limit stays under the limit."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    in_use = len(os.listdir("/proc/self/fd"))
    assert 0 < descriptor_budget() <= soft - in_use - soft // 4
