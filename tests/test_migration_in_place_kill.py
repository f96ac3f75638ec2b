"""``kvlog migrate --in-place`` killed with SIGKILL at many points: the log is never lost or half-written.

A complete run is timed first; then the same run is killed at 60 moments spread evenly from the
process's start to past its end (interpreter start, reading, writing the temporary file, fsync, the
backup link, the rename). After each kill the log must be byte for byte either the original or the
complete result, the backup, if there is one, must be the original, and anything else left behind
must be a hidden temporary file that a later run removes. Both outcomes must occur, or the kill
points did not span the run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_harness import PYTHON_M_KVLOG

KVLOG = [*PYTHON_M_KVLOG, "migrate"]
CORPUS = Path(__file__).parent / "corpus"
KILL_POINTS = 60


def big_log() -> bytes:
    """About 5 MB: mostly request lines copied through, with a memory line every ~45."""
    requests = b"".join((CORPUS / "distractors.log").read_bytes().splitlines(keepends=True)[:3])
    return (requests * 300 + (CORPUS / "gen2_2025.log").read_bytes()) * 40


def migrate_in_place(directory: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*KVLOG, "--in-place", *extra, "app.log"], cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def test_sigkill_at_60_points_leaves_the_original_or_the_complete_result(tmp_path: Path) -> None:
    original = big_log()

    def complete_run(index: int) -> float:
        """A whole run's wall time, with two at once as the kills below run."""
        reference = tmp_path / f"reference{index}"
        reference.mkdir()
        (reference / "app.log").write_bytes(original)
        started = time.perf_counter()
        complete = migrate_in_place(reference)
        assert complete.wait(timeout=120) == 0, complete.stderr.read() if complete.stderr else b""
        return time.perf_counter() - started

    with ThreadPoolExecutor(2) as pool:
        duration = max(pool.map(complete_run, range(2)))
    reference = tmp_path / "reference0"
    result = (reference / "app.log").read_bytes()
    assert result != original and (reference / "app.log.orig").read_bytes() == original

    def kill_at(point: int) -> str:
        directory = tmp_path / f"kill{point}"
        directory.mkdir()
        log = directory / "app.log"
        log.write_bytes(original)
        log.chmod(0o640)
        process = migrate_in_place(directory)
        # up to 1.5x a whole run: a third of the points land after it, however loaded the machine
        time.sleep(duration * 1.5 * point / (KILL_POINTS - 1))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        if process.stderr:
            process.stderr.close()
        content = log.read_bytes()
        assert content in (original, result), f"kill point {point}: the log is neither the original nor the result"
        assert log.stat().st_mode & 0o777 == 0o640
        backup = directory / "app.log.orig"
        if backup.exists():
            assert backup.read_bytes() == original, f"kill point {point}: the backup is not the original"
        others = [p.name for p in directory.iterdir() if p.name not in ("app.log", "app.log.orig")]
        assert all(name.startswith(".") and name.endswith(".kvlog-tmp") for name in others), others
        if content == result:
            assert backup.exists(), f"kill point {point}: replaced without a backup"
        # A later run completes the job from whatever was left and removes the leftovers (checked at a few
        # points only: each costs a whole run).
        if point % 8 == 0:
            again = migrate_in_place(directory)
            assert again.wait(timeout=120) == 0
            assert log.read_bytes() == result and backup.read_bytes() == original
            assert sorted(p.name for p in directory.iterdir()) == ["app.log", "app.log.orig"]
        shutil.rmtree(directory)
        return "result" if content == result else "original"

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(kill_at, range(KILL_POINTS)))
    print({outcome: outcomes.count(outcome) for outcome in ("original", "result")})
    assert outcomes.count("original") >= 5 and outcomes.count("result") >= 5, outcomes


def test_symlinks_planted_at_the_predictable_paths_are_not_followed(tmp_path: Path) -> None:
    """The backup name is predictable: a link planted there is neither written through nor replaced.

    A backup is never overwritten, so a planted one stops the run (exit 2) with the log, the link and
    its victim as they were; a link at a staging-like name is ignored.
    """
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "app.log"
    original = (CORPUS / "gen2_2025.log").read_bytes()
    log.write_bytes(original)
    (logs / ".app.log.orig.kvlog-tmp").symlink_to(victim)
    (logs / "app.log.orig").symlink_to(victim)
    done = migrate_in_place(logs)
    assert done.wait(timeout=60) == 2
    assert done.stderr is not None and b"app.log.orig already exists" in done.stderr.read()
    assert victim.read_bytes() == b"precious\n" and log.read_bytes() == original
    assert (logs / "app.log.orig").is_symlink()
    (logs / "app.log.orig").unlink()
    assert migrate_in_place(logs).wait(timeout=60) == 0
    assert victim.read_bytes() == b"precious\n"
    assert not (logs / "app.log.orig").is_symlink()
    assert (logs / "app.log.orig").read_bytes() == original
    assert b'"event"' in log.read_bytes()


def test_the_temporary_file_is_created_exclusively_beside_the_target(tmp_path: Path) -> None:
    """Temporary names are random and opened O_EXCL: fill the directory with links to a victim first."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_bytes((CORPUS / "gen2_2025.log").read_bytes())
    for index in range(200):
        (logs / f".app.log.{index:08d}.kvlog-tmp").symlink_to(victim)
    assert migrate_in_place(logs).wait(timeout=60) == 0
    assert victim.read_bytes() == b"precious\n"


def test_permissions_and_owner_of_the_original_are_kept(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes((CORPUS / "gen2_2025.log").read_bytes())
    log.chmod(0o604)
    owner = (os.getuid(), os.getgid())
    if os.geteuid() == 0:
        owner = (1234, 2345)
        os.chown(log, *owner)
    assert migrate_in_place(tmp_path).wait(timeout=60) == 0
    stat = log.stat()
    assert stat.st_mode & 0o7777 == 0o604
    assert (stat.st_uid, stat.st_gid) == owner
    backup = (tmp_path / "app.log.orig").stat()
    assert (backup.st_mode & 0o7777, backup.st_uid, backup.st_gid) == (0o604, *owner)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_new_output_file_gets_the_usual_permissions_not_0600(tmp_path: Path, suffix: str) -> None:
    """``-o`` creates its file through a private temporary file; the result must be readable as umask says."""
    out = tmp_path / f"out.jsonl{suffix}"
    done = subprocess.run(
        [*KVLOG, str(CORPUS / "gen2_2025.log"), "-o", str(out)],
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o644
