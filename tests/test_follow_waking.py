"""``kvlog follow``'s waits: woken by the kernel at a change in a watched directory, by ``wake()``, or a stop.

Each wait here is given an hour's tick (and poll), so a wait that returns did so for the reason the test
gives it, never because its time ran out; a thread's bounded join stands for "returns", so a broken wake-up
fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from follow_helpers import append, passes

from kvlog.follow.waking import Waker
from kvlog.io.tailing import Tailer
from kvlog.migration.candidates import MAX_LINE_BYTES

HOUR = 3600.0


@contextmanager
def waker_on(directory: Path, *, force_polling: bool = False) -> Iterator[Waker]:
    """A waker for the logs ``directory/*.log``, with an hour's tick and poll; closed at the end."""
    tailer = Tailer((str(directory / "*.log"),), max_line_bytes=MAX_LINE_BYTES)
    waker = Waker(tailer, threading.Event(), tick_s=HOUR, poll_s=HOUR, force_polling=force_polling)
    try:
        yield waker
    finally:
        waker.close()
        tailer.close()


def returns(wait: Callable[[], None], meanwhile: Callable[[], None] = lambda: None) -> bool:
    """Whether ``wait()`` returns once ``meanwhile()`` has run beside it (within a bound far below the hour)."""
    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    meanwhile()
    thread.join(30)
    return not thread.is_alive()


def test_waits_use_inotify_unless_polling_is_asked_for(tmp_path: Path) -> None:
    with waker_on(tmp_path) as waker:
        assert waker.uses_inotify
    with waker_on(tmp_path, force_polling=True) as waker:
        assert not waker.uses_inotify


def test_without_the_follow_extra_waits_are_polled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inotify_simple", None)  # import inotify_simple: ImportError
    with waker_on(tmp_path) as waker:
        assert not waker.uses_inotify


def test_a_kernel_without_inotify_left_is_polled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import inotify_simple  # noqa: PLC0415 - the follow extra

    def exhausted() -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(inotify_simple, "INotify", exhausted)
    with waker_on(tmp_path) as waker:
        assert not waker.uses_inotify


@pytest.mark.parametrize("force_polling", [False, True], ids=["inotify", "polled"])
def test_a_wait_once_stopped_returns_at_once(tmp_path: Path, force_polling: bool) -> None:
    with waker_on(tmp_path, force_polling=force_polling) as waker:
        waker.stop.set()
        assert returns(waker.wait)


@pytest.mark.parametrize("force_polling", [False, True], ids=["inotify", "polled"])
def test_a_stop_ends_a_wait_under_way(tmp_path: Path, force_polling: bool) -> None:
    with waker_on(tmp_path, force_polling=force_polling) as waker:

        def stop() -> None:
            waker.stop.set()
            waker.wake()  # what the signal handlers do

        assert returns(waker.wait, stop)


def test_a_wake_up_asked_for_before_the_wait_ends_it(tmp_path: Path) -> None:
    with waker_on(tmp_path) as waker:
        waker.wake()
        assert returns(waker.wait)


def test_wake_ups_beyond_what_the_pipe_holds_are_not_an_error(tmp_path: Path) -> None:
    with waker_on(tmp_path) as waker:
        for _ in range(70_000):  # more than a pipe's 64 KiB: a wake-up already pending is enough
            waker.wake()
        assert returns(waker.wait)


def create(directory: Path) -> None:
    (directory / "new.log").write_text("a line\n")


def grow(directory: Path) -> None:
    append(directory / "server.log", "a line\n")


def delete(directory: Path) -> None:
    (directory / "server.log").unlink()


def rename_away(directory: Path) -> None:
    (directory / "server.log").rename(directory / "server.log.1")


def rename_in(directory: Path) -> None:
    (directory / "server.log.1").rename(directory / "server.log")


def change_its_mode(directory: Path) -> None:
    (directory / "server.log").chmod(0o600)


@pytest.mark.parametrize("change", [create, grow, delete, rename_away, rename_in, change_its_mode])
def test_a_change_in_a_watched_directory_ends_the_wait(tmp_path: Path, change: Callable[[Path], None]) -> None:
    (tmp_path / "server.log").write_text("a line\n")
    (tmp_path / "server.log.1").write_text("a line\n")
    with waker_on(tmp_path) as waker:
        waker.wake()
        waker.wait()  # the first wait starts the watches
        assert returns(waker.wait, lambda: change(tmp_path))


def test_the_directory_of_each_followed_file_is_watched_too(tmp_path: Path) -> None:
    """``logs/*/server.log`` watches ``logs``; a server's writes in ``logs/a`` must wake the follower too."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "server.log").write_text("a line\n")
    with passes(str(tmp_path / "*" / "server.log")) as run:
        run.poll()
        waker = Waker(run.tailer, threading.Event(), tick_s=HOUR)
        try:
            waker.wake()
            waker.wait()
            assert returns(waker.wait, lambda: append(tmp_path / "a" / "server.log", "more\n"))
        finally:
            waker.close()


def test_close_releases_every_descriptor_and_may_be_called_again(tmp_path: Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    with waker_on(tmp_path) as waker:
        waker.wake()
        waker.wait()
        assert set(os.listdir("/proc/self/fd")) != before
        waker.close()
        assert not waker.uses_inotify
    assert set(os.listdir("/proc/self/fd")) == before
