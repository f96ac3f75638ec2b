"""``kvlog follow``'s waits: woken by the kernel at a change in a watched directory, by ``wake()``, or a stop.

Each wait here is given an hour's tick (and poll), so a wait that returns did so for the reason the test
gives it, never because its time ran out; a thread's bounded join stands for "returns", so a broken wake-up
fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from follow_helpers import append, passes

from kvlog.follow import waking
from kvlog.follow.waking import _MIN_PASS_S, Waker
from kvlog.io.tailing import Tailer
from kvlog.migration.candidates import MAX_LINE_BYTES

HOUR = 3600.0


@contextmanager
def waker_on(directory: Path, *, force_polling: bool = False, stop: threading.Event | None = None) -> Iterator[Waker]:
    """A waker for the logs ``directory/*.log``, with an hour's tick and poll; closed at the end."""
    tailer = Tailer((str(directory / "*.log"),), max_line_bytes=MAX_LINE_BYTES)
    stop = threading.Event() if stop is None else stop
    waker = Waker(tailer, stop, tick_s=HOUR, poll_s=HOUR, force_polling=force_polling)
    try:
        yield waker
    finally:
        waker.close()
        tailer.close()


def returns(wait: Callable[[], None], meanwhile: Callable[[], None] = lambda: None) -> bool:
    """Whether ``wait()`` returns once ``meanwhile()`` has run beside it (within a bound far below the hour).

    A wait that raised did not return: its exception is raised here.
    """
    raised: list[BaseException] = []

    def waiting() -> None:
        try:
            wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            raised.append(exc)

    thread = threading.Thread(target=waiting, daemon=True)
    thread.start()
    meanwhile()
    thread.join(30)
    if raised:
        raise raised[0]
    return not thread.is_alive()


class FakeTime:
    """Stands for the ``time`` module in ``kvlog.follow.waking``: a clock the test moves, and the sleeps asked for."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:  # as time.sleep
            raise ValueError("sleep length must be non-negative")
        self.slept.append(seconds)
        self.now += seconds


class RecordingPoller:
    """Stands for a waker's ``select.poll``: records each wait's timeout, runs ``during``, returns at once."""

    def __init__(self, during: Callable[[], None] = lambda: None) -> None:
        self.timeouts: list[int] = []
        self.during = during

    def poll(self, timeout: int) -> list[tuple[int, int]]:
        self.timeouts.append(timeout)
        self.during()
        return []


class RecordingStop(threading.Event):
    """A stop event that records how long each wait on it was to last, and never blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return super().wait(0)


def test_waits_use_inotify_unless_polling_is_asked_for(tmp_path: Path) -> None:
    with waker_on(tmp_path) as waker:
        assert waker.uses_inotify
    with waker_on(tmp_path, force_polling=True) as waker:
        assert not waker.uses_inotify
    tailer = Tailer((str(tmp_path / "*.log"),), max_line_bytes=MAX_LINE_BYTES)
    waker = Waker(tailer, threading.Event())  # the defaults: inotify
    try:
        assert waker.uses_inotify
    finally:
        waker.close()
        tailer.close()


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

        def wake_often() -> None:
            for _ in range(70_000):  # more than a pipe's 64 KiB: a wake-up already pending is enough
                waker.wake()

        assert returns(wake_often)  # never blocks (a signal handler calls it)
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
        assert returns(waker.wait)  # the first wait starts the watches
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
            assert returns(waker.wait)
            assert returns(waker.wait, lambda: append(tmp_path / "a" / "server.log", "more\n"))
        finally:
            waker.close()


def test_close_releases_every_descriptor_and_may_be_called_again(tmp_path: Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    with waker_on(tmp_path) as waker:
        waker.wake()
        assert returns(waker.wait)
        assert set(os.listdir("/proc/self/fd")) != before
        waker.close()
        assert not waker.uses_inotify
    assert set(os.listdir("/proc/self/fd")) == before


def test_an_idle_wait_blocks_in_the_kernel_for_the_tick(tmp_path: Path) -> None:
    """The tick (seconds) is what ``poll()`` is given, in milliseconds: an idle follower wakes once a tick."""
    with waker_on(tmp_path) as waker:
        waker._poller = RecordingPoller()  # type: ignore[assignment]
        assert returns(waker.wait)
        assert waker._poller.timeouts == [int(HOUR * 1000)]


def test_a_polled_wait_sleeps_the_poll_interval_on_the_stop_event(tmp_path: Path) -> None:
    """Without inotify the wait is ``poll_s`` long, and ends early when the stop is set (it waits on the stop)."""
    stop = RecordingStop()
    with waker_on(tmp_path, force_polling=True, stop=stop) as waker:
        assert returns(waker.wait)
    assert stop.waits == [HOUR]


def test_what_ended_a_wait_does_not_end_the_next_one(tmp_path: Path) -> None:
    """The change and the wake-up a wait returned for are used up: an idle follower does not spin."""
    (tmp_path / "server.log").write_text("a line\n")
    with waker_on(tmp_path) as waker:
        waker.wake()
        assert returns(waker.wait)  # the first wait starts the watches
        assert returns(waker.wait, lambda: grow(tmp_path))
        assert waker._poller.poll(0) == []
        waker.wake()
        assert returns(waker.wait)
        assert waker._poller.poll(0) == []


def test_passes_are_at_least_the_minimum_interval_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server writing line by line costs one pass per interval: a wait ending early sleeps the rest of it."""
    clock = FakeTime()
    monkeypatch.setattr(waking, "time", clock)
    with waker_on(tmp_path) as waker:
        waker.wake()
        assert returns(waker.wait)
        assert clock.slept == []  # no pass before the first
        clock.now += _MIN_PASS_S / 4
        waker.wake()
        assert returns(waker.wait)
        assert clock.slept == [pytest.approx(_MIN_PASS_S * 3 / 4)]
        clock.now += _MIN_PASS_S * 2  # the interval has passed since the last pass
        waker.wake()
        assert returns(waker.wait)
        assert clock.slept == [pytest.approx(_MIN_PASS_S * 3 / 4)]


def test_a_stop_during_a_wait_is_not_held_back_by_the_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeTime()
    monkeypatch.setattr(waking, "time", clock)
    with waker_on(tmp_path) as waker:
        waker.wake()
        assert returns(waker.wait)
        clock.now += _MIN_PASS_S / 4
        waker._poller = RecordingPoller(during=waker.stop.set)  # type: ignore[assignment]
        assert returns(waker.wait)
        assert clock.slept == []


def test_a_followed_files_directory_removed_and_made_again_is_watched_again(tmp_path: Path) -> None:
    """``logs/*/server.log``: a server's directory replaced (a redeploy) must wake the follower at its writes."""
    server = tmp_path / "a"
    server.mkdir()
    (server / "server.log").write_text("a line\n")
    with passes(str(tmp_path / "*" / "server.log"), drain_s=0.0) as run:
        run.poll()
        waker = Waker(run.tailer, threading.Event(), tick_s=HOUR)
        try:
            waker.wake()
            assert returns(waker.wait)  # watches tmp_path and a
            shutil.rmtree(server)
            run.poll()  # the file is gone: no longer followed
            waker.wake()
            assert returns(waker.wait)  # a is no longer watched
            server.mkdir()
            (server / "server.log").write_text("a line\n")
            run.poll()  # found again, as at a tick's pass
            waker.wake()
            assert returns(waker.wait)  # watched again
            assert returns(waker.wait, lambda: append(server / "server.log", "more\n"))
        finally:
            waker.close()
