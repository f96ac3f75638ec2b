"""Progress over a whole run: every file and every byte on disk counted once, whichever local engine runs it.

The display (``kvlog.cli.progress``) is told increments of files and bytes done; these tests record
them through the commands' ``progress`` argument and check that they reach the inputs' totals
exactly (a failed input counts as done), and that a large file's bytes are told as it is read.
The engine ``ray`` is tested on a real cluster in test_fleet_ray_summarize.py.
"""

from __future__ import annotations

import functools
import gzip
import io
from pathlib import Path

import pytest
from cli_harness import kvlog_text
from fleet_helpers import fleet_logs
from progress_helpers import Recorder, sizes
from test_migration_cli import stderr_on_a_terminal

from kvlog import commands
from kvlog.cli import progress as cli_progress
from kvlog.cli.progress import progress_reporter
from kvlog.io import progress, workers
from kvlog.text.units import BYTES

CORPUS = Path(__file__).resolve().parent / "corpus"


def events_file(path: Path, repeat: int) -> Path:
    """A file of current kvlog events (the corpus's, ``repeat`` times over) for validate."""
    out = io.BytesIO()
    made = commands.migrate(sorted(CORPUS.glob("*.log")), only_events=True, stdout=out)
    assert made.exit_status == 0, made.problems
    path.write_bytes(out.getvalue() * repeat)
    return path


@pytest.mark.parametrize("jobs", [1, 3])
def test_migrate_counts_every_file_and_byte_once_a_failed_input_included(jobs: int, tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 12, repeat=30)
    recorder = Recorder()
    done = commands.migrate(logs, output=tmp_path / "out", jobs=jobs, progress=recorder)
    assert done.exit_status == 2 and len(done.problems) == 1  # the .gz cut short: named, and counted as done
    assert recorder.names == list(map(str, logs))
    assert recorder.totals == (len(logs), sizes(logs))
    assert [files for files, _ in recorder.steps if files] == [1] * len(logs)
    assert min(count for _, count in recorder.steps) >= 0  # the bytes never go back


@pytest.mark.parametrize("command", ["migrate", "validate"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_nobody_watches_asks_no_inputs_size(
    command: str, jobs: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a store a size is a request an object: a run without a display (cron, a pipe) makes none."""
    logs = fleet_logs(tmp_path / "logs", CORPUS, 3, repeat=2)
    asked: list[str] = []
    monkeypatch.setattr(progress, "input_size", asked.append)
    monkeypatch.setattr(cli_progress, "input_size", asked.append)
    if command == "migrate":
        done = commands.migrate(logs, output=tmp_path / "out", jobs=jobs)
    else:
        done = commands.validate(events_file(tmp_path / "events.jsonl", 1), jobs=jobs)
    assert done.exit_status in (0, 2)
    with progress_reporter(list(map(str, logs)), wanted=None):  # the CLI's display where stderr is not a terminal
        pass
    assert asked == []


@pytest.mark.parametrize("command", ["migrate", "validate"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_shown_run_asks_each_inputs_size_once(
    command: str, jobs: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The display's totals and the run's tally share one lookup per input (on a store, one request)."""
    logs = fleet_logs(tmp_path / "logs", CORPUS, 3, repeat=2)
    inputs = logs if command == "migrate" else [events_file(tmp_path / f"events{n}.jsonl", 1) for n in range(3)]
    asked: list[str] = []

    def size_of(name: str) -> int:
        asked.append(name)
        return Path(name).stat().st_size

    monkeypatch.setattr(progress, "input_size", size_of)
    monkeypatch.setattr(cli_progress, "input_size", size_of)
    shown = functools.partial(progress_reporter, wanted=True, command=command)
    if command == "migrate":
        done = commands.migrate(inputs, output=tmp_path / "out", jobs=jobs, progress=shown)
    else:
        done = commands.validate(inputs, jobs=jobs, progress=shown)
    assert done.exit_status in (0, 2)
    assert sorted(asked) == sorted(map(str, inputs))
    total = BYTES.format(sizes(inputs))
    assert f"{len(inputs)}/{len(inputs)} files, {total} of {total}" in capsys.readouterr().err


def test_migrate_in_one_process_tells_a_large_files_bytes_as_it_reads_them(tmp_path: Path) -> None:
    big = tmp_path / "big.log.gz"  # counted as the compressed bytes read, not the text they hold
    # ~1.2 MB of text: told in about 14 reads (x100 is told in one, as if read at once; x4000 took 10 s)
    big.write_bytes(gzip.compress((CORPUS / "gen2_2025.log").read_bytes() * 400, compresslevel=1))
    recorder = Recorder()
    assert commands.migrate(big, output=tmp_path / "out.gz", progress=recorder).exit_status == 0
    reads = recorder.reads_before_first_file()
    assert len(reads) > 1 and all(count > 0 for count in reads)
    assert sum(reads) <= big.stat().st_size
    assert recorder.totals == (1, big.stat().st_size)


def test_worker_processes_tell_a_large_files_bytes_while_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "READ_POLL_S", 0.001)  # the parent looks at its workers' reads as often as it can
    big = tmp_path / "big.log"
    big.write_bytes((CORPUS / "gen2_2025.log").read_bytes() * 400)  # ~1.2 MB: a second or more of a worker's work
    small = fleet_logs(tmp_path / "logs", CORPUS, 2)[:-1]
    recorder = Recorder()
    assert commands.migrate([big, *small], output=tmp_path / "out", jobs=2, progress=recorder).exit_status == 0
    assert recorder.reads_before_first_file(), "the big file's bytes came only with its result"
    assert recorder.totals == (3, sizes([big, *small]))
    assert min(count for _, count in recorder.steps) >= 0


@pytest.mark.parametrize("jobs", [1, 2])
def test_validate_counts_every_file_and_byte_once_an_unreadable_input_included(jobs: int, tmp_path: Path) -> None:
    events = events_file(tmp_path / "events.jsonl", repeat=40)  # split in byte ranges: told range by range
    packed = tmp_path / "events.jsonl.gz"
    packed.write_bytes(gzip.compress(events.read_bytes()[:5000]))
    again = tmp_path / "again.jsonl"
    again.write_bytes(events.read_bytes())
    inputs = [events, packed, tmp_path / "missing.jsonl", again]
    recorder = Recorder()
    done = commands.validate(inputs, jobs=jobs, progress=recorder, on_finding=lambda _: None)
    assert done.exit_status == 2 and [failure.name for failure in done.input_failures] == [str(inputs[2])]
    assert recorder.totals == (len(inputs), sizes(inputs))
    assert len(recorder.reads_before_first_file()) > 1


def test_the_plain_lines_count_files_and_bytes_where_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 4)
    events = events_file(tmp_path / "events.jsonl", repeat=2)
    again = tmp_path / "again.jsonl"
    again.write_bytes(events.read_bytes())
    for command, inputs in (("migrate", logs), ("validate", [events, again])):
        done = kvlog_text(command, *inputs, "--progress", "--jobs", "2")
        lines = [line for line in done.stderr.splitlines() if " progress " in line]
        count, total = len(inputs), BYTES.format(sizes(inputs))
        assert lines[0].startswith(f"kvlog {command}: progress 0%, 0/{count} files, 0 B of {total}, "), lines
        assert lines[-1].startswith(f"kvlog {command}: progress 100%, {count}/{count} files, {total} of {total}, ")
    quiet = kvlog_text("validate", events)
    assert quiet.returncode == 0 and " progress " not in quiet.stderr  # not asked for, on a pipe: nothing


def test_the_bar_on_a_terminal_ends_on_every_file_done(tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 3)[:-1]
    seen = stderr_on_a_terminal(*logs, "--progress", "-o", tmp_path / "out")
    total = BYTES.format(sizes(logs)).encode()
    assert b"migrating  [" in seen and b"100%  3/3 files, " + total + b" of " + total in seen
