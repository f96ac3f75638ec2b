"""``kvlog migrate`` on an operator's only copy of a log: nothing it runs on is lost, whatever else runs.

Each test is one class of the defects an adversarial run of main found (issue 9): a second
``--in-place`` run, outputs that name inputs, a log still being written, links in the tree, a log
swapped for a link mid-run, signals, full disks, permissions, and option handling.

A rule of what a run may do is tested through ``kvlog.commands.migrate``, in process; subprocesses
remain for what needs a process: signals, kills, runs at once, dropped capabilities, the console.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cli_harness
import orjson
import pytest
from cli_harness import PYTHON_M_KVLOG, kvlog_process
from process_helpers import children
from test_cli_hostile_files import without_read_override
from test_migration_cli import stderr_on_a_terminal

from kvlog import commands
from kvlog.io.errors import OutputError

KVLOG = [*PYTHON_M_KVLOG, "migrate"]
CORPUS = Path(__file__).parent / "corpus"
OLD = (CORPUS / "gen2_2025.log").read_bytes()
MAMBA_HOST = b"[2026-03-11 02:10:41 TP0] Allocating 9.66 GB host memory for hierarchical Mamba cache\n"
MYSTERY = b"[2026-03-11 02:10:42 TP0] KV Cache is allocated in a way no release printed: 3.00 GB\n"


def kvlog(*args: str | Path, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    """``kvlog migrate ARGS`` in process; a real process where ``kwargs`` need one (``preexec_fn``, ``stdout``)."""
    if kwargs.keys() <= {"cwd"}:
        return cli_harness.kvlog("migrate", *args, **kwargs)
    return kvlog_process(*args, command=KVLOG, **kwargs)


def migrate(*inputs: str | Path, **options: object) -> commands.MigrateOutcome:
    return commands.migrate(inputs, **options)  # type: ignore[arg-type]


def big_log() -> bytes:
    """About 10 MB, a memory line every ~45: a run takes long enough to be interfered with."""
    requests = b"".join((CORPUS / "distractors.log").read_bytes().splitlines(keepends=True)[:3])
    return (requests * 300 + OLD) * 80


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and not p.is_symlink()}


def temporaries(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if p.name.endswith(".kvlog-tmp")]


# -- 1. a second --in-place run never destroys the backup ---------------------------------------------------------


def test_a_second_in_place_run_keeps_the_backup_and_says_already_current(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    original_inode = log.stat().st_ino
    first = migrate(log, in_place=True)
    assert first.exit_status == 0, first.problems
    assert (tmp_path / "app.log.orig").stat().st_ino == original_inode, "the backup is the original file, not a copy"
    migrated = log.read_bytes()
    assert migrated != OLD and (tmp_path / "app.log.orig").read_bytes() == OLD
    inode = log.stat().st_ino
    for _ in range(2):  # a nightly job, a retry
        notices: list[str] = []
        again = migrate(log, in_place=True, on_notice=notices.append)
        assert again.exit_status == 0, again.problems
        assert notices == [f"{log}: already current, unchanged"]
        assert log.read_bytes() == migrated and log.stat().st_ino == inode
        assert (tmp_path / "app.log.orig").read_bytes() == OLD
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("backup_kind", ["file", "empty", "directory", "symlink", "hardlink-of-other"])
def test_a_foreign_backup_refuses_the_file_unless_a_new_suffix_is_named(tmp_path: Path, backup_kind: str) -> None:
    log = tmp_path / "app.log.gz"
    log.write_bytes(gzip.compress(OLD))
    backup = tmp_path / "app.log.gz.orig"
    other = tmp_path / "other"
    other.write_bytes(b"the only copy of an earlier original\n")
    if backup_kind == "file":
        backup.write_bytes(b"the only copy of an earlier original\n")
    elif backup_kind == "empty":
        backup.touch()
    elif backup_kind == "directory":
        backup.mkdir()
    elif backup_kind == "symlink":
        backup.symlink_to(other)
    else:
        os.link(other, backup)
    before = snapshot(tmp_path)
    refused = migrate(log, in_place=True, option_names={"backup_suffix": "--backup-suffix"})
    assert refused.exit_status == 2
    (problem,) = refused.problems
    assert str(log) in problem and str(backup) in problem and "name a new backup with --backup-suffix" in problem
    assert snapshot(tmp_path) == before and temporaries(tmp_path) == []
    assert backup.exists() or backup.is_symlink()
    renamed = migrate(log, in_place=True, backup_suffix=".orig2")
    assert renamed.exit_status == 0, renamed.problems
    assert gzip.decompress((tmp_path / "app.log.gz.orig2").read_bytes()) == OLD
    assert other.read_bytes() == b"the only copy of an earlier original\n"
    assert b'"event"' in gzip.decompress(log.read_bytes())


def test_a_current_file_is_left_alone_even_beside_a_foreign_backup(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b'{"event":"request_done"}\nplain text, no memory line\n')
    (tmp_path / "app.log.orig").write_bytes(b"an unrelated file\n")
    before = snapshot(tmp_path)
    done = migrate(log, in_place=True)
    assert done.exit_status == 0, done.problems
    assert done.notes == {"already current": 1}
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_runs_at_once_on_one_file_take_turns_and_keep_the_original(tmp_path: Path) -> None:
    original = big_log()
    expected: bytes | None = None
    for round_ in range(3):
        work = tmp_path / f"round{round_}"
        work.mkdir()
        log = work / "app.log"
        log.write_bytes(original)
        runs = [subprocess.Popen([*KVLOG, "--in-place", str(log)], stderr=subprocess.PIPE) for _ in range(4)]
        outputs = [run.communicate(timeout=300)[1] for run in runs]
        assert [run.returncode for run in runs] == [0, 0, 0, 0], outputs
        assert sum(b"already current, unchanged" in err for err in outputs) == 3, outputs
        assert hashlib.sha256((work / "app.log.orig").read_bytes()).digest() == hashlib.sha256(original).digest()
        result = log.read_bytes().replace(str(log).encode(), b"LOG")
        expected = expected or result
        assert result == expected and b'"event"' in result
        assert sorted(p.name for p in work.iterdir()) == ["app.log", "app.log.orig"]


# -- 2. no output may name an input or another output ----------------------------------------------------------------


def test_an_output_that_names_an_input_is_refused_on_the_console(tmp_path: Path) -> None:
    """Each case is in test_commands.py; here, that the CLI says it on one line, exits 2 and writes nothing."""
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    (tmp_path / "link.log").symlink_to(log)
    before = snapshot(tmp_path)
    done = kvlog(log, "--in-place", "--dead-letter", tmp_path / "link.log")
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode() == (
        f"kvlog migrate: --dead-letter {tmp_path / 'link.log'} is the input {log}; it would be overwritten\n"
    )
    assert snapshot(tmp_path) == before


# -- 3. a log written to while it is migrated is never cut ---------------------------------------------------------


def test_lines_appended_during_in_place_are_never_lost(tmp_path: Path) -> None:
    for attempt in range(3):
        log = tmp_path / f"live{attempt}.log"
        log.write_bytes(big_log())
        stop = threading.Event()
        appended: list[bytes] = []

        def server(path: Path = log, stop: threading.Event = stop, appended: list[bytes] = appended) -> None:
            with path.open("ab", buffering=0) as out:
                while not stop.is_set():
                    line = f"[2026-07-21 09:10:00 TP0] request {len(appended)} done\n".encode()
                    out.write(line)
                    appended.append(line)
                    time.sleep(0.002)

        writer = threading.Thread(target=server, daemon=True)
        writer.start()
        done = migrate(log, in_place=True)
        stop.set()
        writer.join(timeout=30)
        content = log.read_bytes()
        assert done.exit_status == 2, done.problems
        assert "changed while migrating" in done.problems[0]
        assert content.startswith(big_log()) and content.endswith(b"".join(appended))
        assert not (tmp_path / f"live{attempt}.log.orig").exists() and temporaries(tmp_path) == []


# -- 4 and 5. links: never followed out of the tree, never swapped in --------------------------------------------------


def test_in_place_on_a_directory_skips_links_out_of_the_tree(tmp_path: Path) -> None:
    logs, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    logs.mkdir()
    elsewhere.mkdir()
    outside = elsewhere / "b.log"
    outside.write_bytes(OLD)
    os.link(outside, elsewhere / "b-hardlink.log")
    (logs / "a.log").symlink_to(outside)
    (logs / "sub").symlink_to(elsewhere, target_is_directory=True)
    (logs / "real.log").write_bytes(OLD)
    done = migrate(logs, in_place=True)
    assert done.exit_status == 0, done.problems
    assert "1 symbolic link(s) skipped" in done.status_line and "a.log" in done.status_line
    assert sorted(p.name for p in elsewhere.iterdir()) == ["b-hardlink.log", "b.log"]
    assert outside.read_bytes() == OLD and outside.stat().st_nlink == 2
    assert (logs / "a.log").is_symlink() and b'"event"' in (logs / "real.log").read_bytes()
    by_glob = migrate(str(logs / "*.log"), in_place=True)
    assert by_glob.exit_status == 0 and "symbolic link(s) skipped" in by_glob.status_line
    assert outside.read_bytes() == OLD


@pytest.mark.slow
def test_a_log_swapped_for_a_link_mid_run_never_brings_another_file_in(tmp_path: Path) -> None:
    """A thread keeps swapping the log for a link to a secret while --in-place runs, 40 times."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"SECRET " * 1000 + b"\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    for attempt in range(40):
        log = logs / "app.log"
        real = logs / "app.log.real"
        log.write_bytes(OLD * 20)
        stop = threading.Event()

        def swap(
            log: Path = log, real: Path = real, stop: threading.Event = stop, pause: float = 0.0005 * (attempt % 5)
        ) -> None:
            link = logs / "app.log.link"
            while not stop.is_set():
                with_link = not log.is_symlink()
                if with_link:
                    os.rename(log, real)
                    link.symlink_to(secret)
                    os.rename(link, log)
                else:
                    os.rename(real, log)
                time.sleep(pause)

        swapper = threading.Thread(target=swap, daemon=True)
        swapper.start()
        done = kvlog("--in-place", log)
        stop.set()
        swapper.join(timeout=30)
        assert done.returncode in (0, 2) and b"Traceback" not in done.stderr
        for path in logs.iterdir():
            if path.is_file() and not path.is_symlink():
                assert b"SECRET" not in path.read_bytes(), f"attempt {attempt}: {path.name} holds the secret"
        for path in list(logs.iterdir()):
            path.unlink()


# -- 6. signals remove every temporary ---------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
@pytest.mark.parametrize("mode", ["-o", "--in-place", "--jobs"])
def test_a_signal_mid_run_removes_temporaries_and_exits_128_plus_n(
    tmp_path: Path, signum: int, status: int, mode: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    staging = tmp_path / "tmp"
    staging.mkdir()
    for index in range(4 if mode == "--jobs" else 1):
        (logs / f"app{index}.log").write_bytes(big_log() * 2)
    before = snapshot(logs)
    arguments = {
        "-o": [str(logs / "app0.log"), "-o", str(tmp_path / "out.jsonl")],
        "--in-place": ["--in-place", str(logs / "app0.log")],
        "--jobs": ["--jobs", "2", str(logs), "-o", str(tmp_path / "out")],
    }[mode]
    process = subprocess.Popen(
        [*KVLOG, *arguments, "--dead-letter", str(tmp_path / "dead.jsonl")],
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(staging)},
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not temporaries(tmp_path) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be stopped: make the log bigger"
    os.killpg(process.pid, signum)  # as a terminal or a service manager does: the whole group
    _, err = process.communicate(timeout=120)
    assert process.returncode == status, err
    assert b"Traceback" not in err and b"stopped by" in err
    assert temporaries(tmp_path) == [] and list(staging.iterdir()) == []
    assert snapshot(logs) == before
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "dead.jsonl").exists()


@pytest.mark.parametrize("mode", ["-o", "--in-place"])
def test_a_stop_that_a_finaliser_swallowed_commits_nothing(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C landing in a weakref or GC callback is swallowed there; the run must stop before any commit.

    It once went on to the end, committed its output and dead letters, and only then exited 130: what
    the ``--jobs`` signal test above saw now and then, when the signal reached a finaliser run while
    the pool forked its workers.
    """
    import gc  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    from kvlog.commands import _migrate  # noqa: PLC0415 - the parent's loop over its tasks

    log = tmp_path / "app.log"
    log.write_bytes(OLD + MYSTERY)
    before = snapshot(tmp_path)
    tasks = _migrate.run_tasks

    def swallowing(*args: Any, **kwargs: Any) -> Any:
        class Held:
            pass

        held = Held()
        weakref.finalize(held, signal.raise_signal, signal.SIGINT)
        del held
        gc.collect()  # the finaliser's Stopped is "Exception ignored": the run goes on
        return tasks(*args, **kwargs)

    monkeypatch.setattr(_migrate, "run_tasks", swallowing)
    target = ["--in-place", log] if mode == "--in-place" else [log, "-o", tmp_path / "out.jsonl"]
    done = kvlog(*target, "--dead-letter", tmp_path / "dead.jsonl")
    assert done.returncode == 130, done.stderr
    assert b"stopped by SIGINT" in done.stderr and b"Traceback" not in done.stderr
    assert snapshot(tmp_path) == before and temporaries(tmp_path) == []


def test_a_worker_killed_mid_run_is_an_error_not_a_hang(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for index in range(8):
        (logs / f"app{index}.log").write_bytes(big_log() * 2)
    before = snapshot(logs)
    process = subprocess.Popen([*KVLOG, "--jobs", "2", "--in-place", str(logs)], stderr=subprocess.PIPE)
    killed = False
    while not killed and process.poll() is None:  # a worker that is writing a migration: what the OOM killer hits
        workers = children(process.pid) if temporaries(logs) else []
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed = True
            break
        time.sleep(0.01)
    assert killed, "the run ended before a worker could be killed"
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2, err
    assert b"a worker process ended unexpectedly" in err and b"Traceback" not in err
    for name, content in snapshot(logs).items():  # each log the original, or its complete migration
        if name.endswith(".kvlog-tmp"):
            continue  # the killed worker's (SIGKILL cannot be cleaned up after)
        if name.endswith(".orig"):
            assert content == before[name.removesuffix(".orig")]
        elif content != before[name]:
            assert (logs / f"{name}.orig").read_bytes() == before[name] and b'"event"' in content
    again = migrate(logs, in_place=True)  # the next run finishes the job and removes what the killed worker left
    assert again.exit_status == 0, again.problems
    assert temporaries(logs) == []


# -- 20. a write error names the file that failed ----------------------------------------------------------------


def test_a_full_disk_under_the_dead_letters_names_the_dead_letters(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD + MAMBA_HOST * 2000)
    (tmp_path / "copy.log").write_bytes(OLD)
    for jobs in (1, 2):
        notices: list[str] = []
        with pytest.raises(OutputError, match=r"^/dev/full: cannot write: No space left on device$"):
            migrate(
                log,
                log.with_name("copy.log"),
                output=tmp_path / "out",
                dead_letter="/dev/full",
                jobs=jobs,
                on_notice=notices.append,
            )
        assert all(notice.startswith("/dev/full: cannot write: No space left on device") for notice in notices)
        assert notices or jobs == 2, "one process: each input's dead letters fail as they are written"
    with Path("/dev/full").open("wb", buffering=0) as full:
        done = migrate(log, stdout=full)
    assert done.exit_status == 2 and done.problems == ("standard output: cannot write: No space left on device",)
    with Path("/dev/full").open("wb") as full:  # and on the console
        run = subprocess.run([*KVLOG, str(log)], stdout=full, stderr=subprocess.PIPE, timeout=300, check=False)
    assert run.returncode == 2 and b"standard output: cannot write: No space left on device" in run.stderr


# -- 22. permissions: the real reason, and the other inputs still run -------------------------------------------------


def test_unreadable_paths_are_named_with_the_real_reason_and_the_rest_runs(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop the override capabilities (CI runs as root)")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inner.log").write_bytes(OLD)
    ok = tmp_path / "ok.log"
    ok.write_bytes(OLD)
    locked.chmod(0o600)  # readable listing, no search: files inside cannot be opened
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "x.log").write_bytes(OLD)
    closed.chmod(0)
    try:
        for args in (
            [locked / "inner.log", ok, "-o", f"{tmp_path / 'out'}/"],
            [closed, ok, "-o", f"{tmp_path / 'out2'}/"],
            [str(closed / "*.log"), ok, "-o", f"{tmp_path / 'out3'}/"],
        ):
            done = kvlog(*args, preexec_fn=without_read_override)
            if done.returncode == 99:
                pytest.skip("cannot drop capabilities here")
            assert done.returncode == 2, done.stderr
            assert b"Permission denied" in done.stderr or b"no file matches" in done.stderr, done.stderr
            assert b"Traceback" not in done.stderr and b"no files in this directory" not in done.stderr
            out = Path(str(args[-1]))
            assert b'"event"' in (out / "ok.log").read_bytes()
        named = kvlog(closed, preexec_fn=without_read_override)
        assert f"{closed}: cannot read the directory: Permission denied".encode() in named.stderr
    finally:
        locked.chmod(0o700)
        closed.chmod(0o700)


def test_a_working_directory_removed_under_the_run_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    done = kvlog(log, "--report", "report.json", "-o", "out.jsonl", cwd=gone, preexec_fn=gone.rmdir)
    assert done.returncode == 2, done.stderr
    assert b"No such file or directory" in done.stderr and b"Traceback" not in done.stderr


# -- 23. a trailing slash means a directory ---------------------------------------------------------------------


def test_an_output_with_a_trailing_slash_is_a_directory_created_on_demand(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    done = migrate(log, output=f"{tmp_path / 'migrated' / 'deeper'}/")
    assert done.exit_status == 0, done.problems
    assert (tmp_path / "migrated" / "deeper").is_dir()
    assert b'"event"' in (tmp_path / "migrated" / "deeper" / "app.log").read_bytes()


# -- 25. progress where stderr is not a terminal -------------------------------------------------------------------


def test_progress_can_be_forced_on_a_pipe_and_silenced_on_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    forced = kvlog(log, "--progress", "-o", tmp_path / "a.jsonl")
    assert forced.returncode == 0
    assert b"kvlog migrate: progress 0%" in forced.stderr and b"kvlog migrate: progress 100%" in forced.stderr
    assert b"progress" not in kvlog(log, "-o", tmp_path / "b.jsonl").stderr
    seen = stderr_on_a_terminal(log, "--no-progress", "--progress", "-o", tmp_path / "c.jsonl")
    assert b"migrating" in seen, "the last of --progress/--no-progress counts: a bar, even for a small input"
    seen = stderr_on_a_terminal(log, "--no-progress", "-o", tmp_path / "d.jsonl")
    assert b"migrating" not in seen and b"progress" not in seen and b"1 file(s)" in seen


# -- 26. lines the user accepts as unparsed ---------------------------------------------------------------------


def test_allowed_unparsed_lines_are_counted_apart_and_do_not_fail_strict(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD + MAMBA_HOST + MYSTERY)
    assert migrate(log, strict=True, stdout=io.BytesIO()).exit_status == 1
    patterns = tmp_path / "accepted.txt"
    patterns.write_text("# known, parsed by a later release\nhierarchical Mamba cache\n\n")
    report, dead = tmp_path / "report.json", tmp_path / "dead.jsonl"
    partly = migrate(
        log, strict=True, allow_unparsed_from=[patterns], report=report, dead_letter=dead, stdout=io.BytesIO()
    )
    assert partly.exit_status == 1, "the mystery line is still unparsed"
    assert orjson.loads(report.read_bytes())["allowed_unparsed_lines"] == 1
    assert b"in a way no release" in dead.read_bytes() and b"Mamba" not in dead.read_bytes()
    stdout = io.BytesIO()
    allowed = migrate(
        log, strict=True, allow_unparsed_from=[patterns], allow_unparsed=[r"in a way no release"], stdout=stdout
    )
    assert allowed.exit_status == 0, allowed.problems
    assert "0 memory-like lines unparsed (and 2 allowed by allow_unparsed)" in allowed.status_line
    assert stdout.getvalue().endswith(MAMBA_HOST + MYSTERY)
    patterns.write_text("fine\n(unclosed\n")
    bad = kvlog(log, "--allow-unparsed-from", patterns)
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"kvlog migrate: {patterns}:2: not a regular expression".encode())
    bad = kvlog(log, "--allow-unparsed", "[")
    assert bad.returncode == 2
    assert bad.stderr.startswith(b"kvlog migrate: --allow-unparsed '[': not a regular expression")


def test_a_cluster_worker_killed_outright_leaves_nothing_behind_once_its_files_are_streamed(tmp_path: Path) -> None:
    """A Ray worker is SIGKILLed when its cluster goes down: no exit hook runs, so it must own no directory."""
    staging = tmp_path / "tmp"
    staging.mkdir()
    log = tmp_path / "app.log"
    log.write_bytes(b"[2025-06-01 10:00:00 TP0] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB.\nhello\n")
    script = (
        "import os, signal, sys\n"
        "from kvlog.migration.batch import _run_in_worker, _start_worker\n"
        "from kvlog.migration.engine import MigrateOptions\n"
        "from kvlog.migration.plan import Destination, Task\n"
        "worker = _start_worker(MigrateOptions(), None, None)\n"
        "result = _run_in_worker(worker, (Task(sys.argv[1], Destination('stdout')), True))\n"
        "print(result.staged_output, result.staged_dead, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script, str(log)],
        capture_output=True,
        env={**os.environ, "TMPDIR": str(staging)},
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr
    staged = [Path(name) for name in process.stdout.decode().split()]
    assert [path.parent for path in staged] == [staging, staging]
    assert b'"event":"kv_pool.allocation"' in staged[0].read_bytes()
    for path in staged:  # what the engine does once it has streamed a file back to the driver
        path.unlink()
    assert list(staging.iterdir()) == []
