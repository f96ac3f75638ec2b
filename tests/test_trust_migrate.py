"""``kvlog migrate`` on an operator's only copy of a log: nothing it runs on is lost, whatever else runs.

Each test is one class of the defects an adversarial run of main found (issue 9): a second
``--in-place`` run, outputs that name inputs, a log still being written, links in the tree, a log
swapped for a link mid-run, signals, full disks, permissions, and option handling.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
from test_hardening_files import without_read_override
from test_migration_cli import stderr_on_a_terminal

KVLOG = [sys.executable, "-m", "kvlog", "migrate"]
CORPUS = Path(__file__).parent / "corpus"
OLD = (CORPUS / "gen2_2025.log").read_bytes()
MAMBA_HOST = b"[2026-03-11 02:10:41 TP0] Allocating 9.66 GB host memory for hierarchical Mamba cache\n"
MYSTERY = b"[2026-03-11 02:10:42 TP0] KV Cache is allocated in a way no release printed: 3.00 GB\n"


def kvlog(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*KVLOG, *map(str, args)],
        capture_output=True,
        timeout=300,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )


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
    first = kvlog("--in-place", log)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "app.log.orig").stat().st_ino == original_inode, "the backup is the original file, not a copy"
    migrated = log.read_bytes()
    assert migrated != OLD and (tmp_path / "app.log.orig").read_bytes() == OLD
    inode = log.stat().st_ino
    for _ in range(2):  # a nightly job, a retry
        again = kvlog("--in-place", log)
        assert again.returncode == 0, again.stderr
        assert f"{log}: already current, unchanged".encode() in again.stderr
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
    refused = kvlog("--in-place", log)
    assert refused.returncode == 2
    assert str(log).encode() in refused.stderr and str(backup).encode() in refused.stderr
    assert b"--backup-suffix" in refused.stderr
    assert snapshot(tmp_path) == before and temporaries(tmp_path) == []
    assert backup.exists() or backup.is_symlink()
    renamed = kvlog("--in-place", "--backup-suffix", ".orig2", log)
    assert renamed.returncode == 0, renamed.stderr
    assert gzip.decompress((tmp_path / "app.log.gz.orig2").read_bytes()) == OLD
    assert other.read_bytes() == b"the only copy of an earlier original\n"
    assert b'"event"' in gzip.decompress(log.read_bytes())


def test_a_current_file_is_left_alone_even_beside_a_foreign_backup(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b'{"event":"request_done"}\nplain text, no memory line\n')
    (tmp_path / "app.log.orig").write_bytes(b"an unrelated file\n")
    before = snapshot(tmp_path)
    done = kvlog("--in-place", log)
    assert done.returncode == 0, done.stderr
    assert b"already current, unchanged" in done.stderr
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


@pytest.mark.parametrize(
    "arguments",
    [
        ["--report", "{input}"],
        ["--dead-letter", "{input}"],
        ["--dry-run", "--report", "{input}"],
        ["--dry-run", "--dead-letter", "{input}"],
        ["--in-place", "--report", "{input}"],
        ["--in-place", "--dead-letter", "{second}"],
        ["--in-place", "--report", "{input}.orig"],
        ["-o", "{out}", "--report", "{second}"],
        ["--report", "{link}"],
        ["--dead-letter", "{hardlink}"],
        ["--report", "{dir}/../logs/app.log"],
        ["-o", "{out}", "--report", "{out}"],
        ["-o", "{out}", "--dead-letter", "{out}"],
        ["--report", "{tmp}/r.json", "--dead-letter", "{tmp}/r.json"],
        ["--report", "{tmp}/r.json", "--dead-letter", "{tmp}/link-to-r.json"],
        ["-o", "{outdir}/", "--report", "{outdir}/app.log"],
        ["-o", "{out}", "--report", "{tmp}"],
        ["--dead-letter", "{dir}"],
    ],
)
def test_an_output_that_names_an_input_or_another_output_is_refused(tmp_path: Path, arguments: list[str]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log, second = logs / "app.log", logs / "second.log"
    log.write_bytes(OLD)
    second.write_bytes(OLD + MAMBA_HOST)
    (tmp_path / "link.log").symlink_to(log)
    os.link(log, tmp_path / "hardlink.log")
    (tmp_path / "r.json").write_bytes(b"{}\n")
    (tmp_path / "link-to-r.json").symlink_to(tmp_path / "r.json")
    names = {
        "input": str(log),
        "second": str(second),
        "out": str(tmp_path / "out.jsonl"),
        "outdir": str(tmp_path / "outdir"),
        "link": str(tmp_path / "link.log"),
        "hardlink": str(tmp_path / "hardlink.log"),
        "dir": str(logs),
        "tmp": str(tmp_path),
    }
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    done = kvlog(log, second, *(argument.format(**names) for argument in arguments))
    assert done.returncode == 2, done.stderr
    assert b"kvlog migrate: " in done.stderr and b"Traceback" not in done.stderr
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before, "an input or an existing file was changed, or an output written"


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
        done = kvlog("--in-place", log)
        stop.set()
        writer.join(timeout=30)
        content = log.read_bytes()
        assert done.returncode == 2, done.stderr
        assert b"changed while migrating" in done.stderr
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
    done = kvlog("--in-place", logs)
    assert done.returncode == 0, done.stderr
    assert b"1 symbolic link(s) skipped" in done.stderr and b"a.log" in done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["b-hardlink.log", "b.log"]
    assert outside.read_bytes() == OLD and outside.stat().st_nlink == 2
    assert (logs / "a.log").is_symlink() and b'"event"' in (logs / "real.log").read_bytes()
    by_glob = kvlog("--in-place", str(logs / "*.log"))
    assert by_glob.returncode == 0 and b"symbolic link(s) skipped" in by_glob.stderr
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


def test_a_worker_killed_mid_run_is_an_error_not_a_hang(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for index in range(4):
        (logs / f"app{index}.log").write_bytes(big_log() * 2)
    before = snapshot(logs)
    process = subprocess.Popen([*KVLOG, "--jobs", "2", "--in-place", str(logs)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not temporaries(logs) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    assert children, "no worker to kill"
    os.kill(int(children[0]), signal.SIGKILL)
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
    again = kvlog("--in-place", logs)  # the next run finishes the job and removes what the killed worker left
    assert again.returncode == 0, again.stderr
    assert temporaries(logs) == []


# -- 20. a write error names the file that failed ----------------------------------------------------------------


def test_a_full_disk_under_the_dead_letters_names_the_dead_letters(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD + MAMBA_HOST * 2000)
    (tmp_path / "copy.log").write_bytes(OLD)
    for jobs in ("1", "2"):
        done = kvlog(log, log.with_name("copy.log"), "-o", tmp_path / "out", "--dead-letter", "/dev/full", "-j", jobs)
        assert done.returncode == 2, done.stderr
        assert b"/dev/full: cannot write: No space left on device" in done.stderr
        assert b"out/app.log:" not in done.stderr
    with Path("/dev/full").open("wb") as full:
        done = subprocess.run([*KVLOG, str(log)], stdout=full, stderr=subprocess.PIPE, timeout=300, check=False)
    assert done.returncode == 2 and b"standard output: cannot write: No space left on device" in done.stderr


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
    done = kvlog(log, "-o", f"{tmp_path / 'migrated' / 'deeper'}/")
    assert done.returncode == 0, done.stderr
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
    assert kvlog(log, "--strict").returncode == 1
    patterns = tmp_path / "accepted.txt"
    patterns.write_text("# known, parsed by a later release\nhierarchical Mamba cache\n\n")
    report, dead = tmp_path / "report.json", tmp_path / "dead.jsonl"
    partly = kvlog(log, "--strict", "--allow-unparsed-from", patterns, "--report", report, "--dead-letter", dead)
    assert partly.returncode == 1, "the mystery line is still unparsed"
    assert orjson.loads(report.read_bytes())["allowed_unparsed_lines"] == 1
    assert b"in a way no release" in dead.read_bytes() and b"Mamba" not in dead.read_bytes()
    allowed = kvlog(log, "--strict", "--allow-unparsed-from", patterns, "--allow-unparsed", r"in a way no release")
    assert allowed.returncode == 0, allowed.stderr
    assert b"0 memory-like lines unparsed (and 2 allowed by --allow-unparsed)" in allowed.stderr
    assert allowed.stdout.endswith(MAMBA_HOST + MYSTERY)
    patterns.write_text("fine\n(unclosed\n")
    bad = kvlog(log, "--allow-unparsed-from", patterns)
    assert bad.returncode == 2 and f"{patterns}:2: not a regular expression".encode() in bad.stderr
    assert kvlog(log, "--allow-unparsed", "[").returncode == 2
