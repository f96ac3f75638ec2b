"""``kvlog follow``'s events file when the system says no: a lock refused, a disk that fails, and what a commit does.

A follower's restart trusts the size its state recorded; a commit must therefore put the file on disk
before it returns that size, and a failure to do so must stop the follower, not pass unnoticed.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kvlog import commands
from kvlog.follow import follower
from kvlog.follow.follower import EventOutput
from kvlog.io.errors import OutputError


def descriptors_of(path: Path) -> int:
    """How many of this process's descriptors name ``path`` (others' threads may open other files meanwhile)."""
    count = 0
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed since the listing
            count += os.readlink(f"/proc/self/fd/{descriptor}") == str(path)
    return count


def test_a_refused_second_follower_leaves_no_descriptor_open(tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    first = EventOutput(str(out), io.BytesIO())
    try:
        with pytest.raises(OutputError):
            EventOutput(str(out), io.BytesIO())
        assert descriptors_of(out) == 1  # the first follower's
    finally:
        first.close()


def test_an_events_file_that_cannot_be_locked_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system without locks (NFS without lockd): a follower that cannot hold the file does not write it."""

    def no_locks(_descriptor: int, _operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(follower.fcntl, "flock", no_locks)
    out = tmp_path / "events.jsonl"
    with pytest.raises(OutputError) as raised:
        EventOutput(str(out), io.BytesIO())
    assert str(raised.value) == f"{out}: cannot lock: {os.strerror(errno.ENOLCK)}"
    assert descriptors_of(out) == 0


def test_a_commit_puts_an_events_file_on_disk_and_a_device_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def recording(descriptor: int) -> None:
        synced.append(os.fstat(descriptor).st_ino)
        real_fsync(descriptor)

    monkeypatch.setattr(follower.os, "fsync", recording)
    out = tmp_path / "events.jsonl"
    output = EventOutput(str(out), io.BytesIO())
    device = EventOutput(os.devnull, io.BytesIO())
    try:
        output.write(b'{"event": "x"}\n')
        assert output.commit() == 15
        device.write(b'{"event": "x"}\n')
        assert device.commit() is None
    finally:
        output.close()
        device.close()
    assert synced == [out.stat().st_ino]


def test_a_commit_the_disk_refuses_stops_the_follower_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state must never record a size that is not on disk: a failed fsync is an error, not a size."""

    def failing(_descriptor: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(follower.os, "fsync", failing)
    out = tmp_path / "events.jsonl"
    output = EventOutput(str(out), io.BytesIO())
    try:
        output.write(b'{"event": "x"}\n')
        with pytest.raises(OutputError) as raised:
            output.commit()
        assert str(raised.value) == f"{out}: cannot write: {os.strerror(errno.EIO)}"
    finally:
        output.close()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full: a device whose writes fail for real")
def test_an_events_output_that_fails_every_write_stops_the_follower_with_its_name_and_no_traceback(
    tmp_path: Path,
) -> None:
    """The write fails at the commit's flush, and again when the output is closed: both must name the file."""
    log = tmp_path / "server.log"
    log.write_text((Path(__file__).parent / "corpus" / "gen2_2025.log").read_text())
    kvlog = str(Path(sys.executable).with_name("kvlog"))
    command = [kvlog, "follow", str(log), "-o", "/dev/full"]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "kvlog follow: /dev/full: cannot write: No space left on device\n"
    with pytest.raises(OutputError, match=r"^/dev/full: cannot write: "):
        commands.follow(str(log), output="/dev/full", stop=threading.Event())
