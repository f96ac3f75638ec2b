"""``follow``: live server logs to current events as they are written, like ``tail -F`` into ``migrate``."""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kvlog.commands import EXIT_OK
from kvlog.commands._migrate import migrator_for
from kvlog.errors import OptionError
from kvlog.follow import state as saved
from kvlog.follow.follower import EventOutput, Follower, Observer
from kvlog.follow.holding import HOLD_S
from kvlog.follow.own import OwnFiles
from kvlog.follow.stall import StallWatch
from kvlog.follow.waking import Waker
from kvlog.io.compression import is_compressed
from kvlog.io.errors import OutputError
from kvlog.io.outputs import stdout_binary
from kvlog.io.stopping import STOP_SIGNALS
from kvlog.io.tailing import FileKey, Tailer, find_beside
from kvlog.metrics.bound import DEFAULT_LIMIT
from kvlog.migration.candidates import MAX_LINE_BYTES
from kvlog.migration.engine import MigrateOptions
from kvlog.migration.sampling import UsageMode
from kvlog.text.printable import printable_name

#: how often the follower wakes with nothing written, to let held events' time run out and see new files
TICK_S = 1.0
#: how long a stop waits for a write that moves no byte (a reader that stopped reading) before dropping it
STALL_PATIENCE_S = 2.0


@dataclass(frozen=True)
class FollowOutcome:
    """What a follow run did before it was stopped."""

    exit_status: int
    #: events written (not counting those a restart read again without writing)
    events: int
    #: whether waits were woken by inotify (False: the files were polled)
    inotify: bool

    @property
    def status_line(self) -> str:
        """One line: how many events the run wrote before it stopped."""
        return f"stopped; {self.events} events written"


def follow(
    paths: str | Path | Iterable[str | Path],
    *,
    output: str | Path | None = None,
    state: str | Path | None = None,
    hold_s: float = HOLD_S,
    new_only: bool = False,
    source: str | None = None,
    year: int | None = None,
    usage: UsageMode = "none",
    migrations: str | Path | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    metrics_label_values: int = DEFAULT_LIMIT,
    otlp_endpoint: str | None = None,
    observers: Iterable[Observer] = (),
    exports: Iterable[Observer] = (),
    poll_s: float | None = None,
    stop: threading.Event | None = None,
    stdout: IO[bytes] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> FollowOutcome:
    """Follow ``paths`` (files, directories, globs) as ``kvlog follow`` does, until ``stop`` is set.

    Events go to ``output`` (a file they are appended to; None or ``-``: ``stdout``, default the
    process's standard output). ``state`` names the file that makes a restart lose and repeat nothing
    (see ``kvlog.follow.state``; with events on standard output, a restart after a kill can repeat the
    events of the last instant). ``hold_s`` bounds how long an event waits for a later line;
    ``new_only`` writes only the events of lines written after the start (earlier lines are still
    read, for the context and the observers). ``usage`` says which periodic usage lines become
    ``kv_pool.usage`` events (``none``, ``sampled``, ``all``: ``kvlog.migration.sampling``), which the
    gauges serve as ``kvlog_kv_pool_usage_ratio``. ``metrics_port`` serves the gauges of ``kvlog.metrics``
    for Prometheus at ``http://metrics_host:metrics_port/metrics`` (0: a free port; the address is
    said through ``on_notice``; ``metrics_label_values`` bounds each label the log names, see
    ``kvlog.metrics.bound``), ``otlp_endpoint`` exports events and gauges over OTLP/HTTP
    (``kvlog.otel``). ``observers`` are told every event read, as the gauges are (also those a restart
    or ``new_only`` does not write: they rebuild the state of the run); ``exports`` (an ``OtelExport``)
    are told each event written, once, as the OTLP export is. ``poll_s`` polls the files at that
    interval instead of waiting on inotify. Without ``stop``, SIGTERM, SIGINT and SIGHUP stop the run
    (in the main thread): what is written is flushed, the state saved, and the outcome's status is 0.
    Events still waiting for a later line are written as they stand when there is no state (as at the
    end of a migrated file); with one, they are left to the restart, which reads their lines again.
    After such a stop, a write of events that moves no byte for 2 s (a reader that stopped reading)
    raises ``OutputError``: the events not yet written are dropped (see ``EventOutput.abandon``).

    Raises ``OptionError`` for options that cannot work, ``StateError`` for a state file that cannot be
    read or saved, ``OutputError`` when the events cannot be written, ``BrokenMigrations``,
    ``MetricsEndpointError`` when the metrics port cannot be listened on, ``MetricsExtraMissing`` and
    ``OtelExtraMissing`` without the extras the options need.
    """
    patterns = tuple(map(str, [paths] if isinstance(paths, (str, Path)) else paths))
    if not patterns:
        raise OptionError("{paths}: name at least one file, directory or pattern to follow")
    if not 0 < hold_s < math.inf:  # nan too: an event would wait for ever
        raise OptionError("{hold_s} {given}: the look-ahead needs some time, and a bound", given=hold_s)
    if poll_s is not None and not 0 < poll_s < math.inf:
        raise OptionError("{poll_s} {given}: polling needs an interval", given=poll_s)
    if metrics_label_values < 1:
        raise OptionError(
            "{metrics_label_values} {given}: a label needs room for one value", given=metrics_label_values
        )
    migrator = migrator_for(
        None if migrations is None else Path(migrations),
        MigrateOptions(only_events=True, source=source, year=year, usage=usage),
    )
    state_path = None if state is None else Path(state)
    with ExitStack() as stack:
        lock = None if state_path is None else stack.enter_context(saved.locked(state_path))
        previous = saved.load(state_path) if state_path is not None else None
        events = EventOutput(None if output is None else str(output), stdout or stdout_binary())
        stack.callback(events.close)
        say = on_notice or (lambda _: None)
        for pattern in patterns:
            if is_compressed(pattern):  # the tailer skips what it names: say so, not wait for ever in silence
                say(
                    f"{printable_name(pattern)}: compressed files are finished rotations, not followed "
                    "(kvlog migrate reads them)"
                )
            elif not Tailer((pattern,), max_line_bytes=MAX_LINE_BYTES).matching():  # as tail -F: waited for, said
                say(f"{printable_name(pattern)}: no file there yet: waiting for one to appear (Ctrl-C stops)")
        if previous is not None:
            _resume_output(previous, events, say)
        gauges, sent = _exports(
            stack, metrics_port, metrics_host, otlp_endpoint, say, label_values=metrics_label_values
        )
        follower = Follower(
            migrator,
            events,
            observers=[*observers, *gauges],
            exports=[*exports, *sent],
            hold_s=hold_s,
            new_only=new_only,
            state=previous,
            clock=time.monotonic,
            on_notice=say,
            own_names=_own_files(events, state_path),
        )
        own = OwnFiles(events.descriptor, lock)
        stack.callback(own.close)
        tailer = Tailer(patterns, max_line_bytes=MAX_LINE_BYTES, own=own.keys)
        stack.callback(tailer.close)
        stopping = stop or threading.Event()
        waker = Waker(tailer, stopping, tick_s=TICK_S, poll_s=poll_s or 0.5, force_polling=poll_s is not None)
        stack.callback(waker.close)
        if stop is None:
            stack.enter_context(_stopped_by_signals(stopping, waker.wake, events, resumable=state_path is not None))
        if previous is not None:
            _adopt_rotated(previous, tailer, follower, say)
        _until_stopped(
            tailer=tailer,
            follower=follower,
            events=events,
            waker=waker,
            stopping=stopping,
            state_path=state_path,
            previous=previous,
            own=own,
        )
        return FollowOutcome(EXIT_OK, follower.written, waker.uses_inotify)


def _until_stopped(
    *,
    tailer: Tailer,
    follower: Follower,
    events: EventOutput,
    waker: Waker,
    stopping: threading.Event,
    state_path: Path | None,
    previous: saved.FollowState | None,
    own: OwnFiles,
) -> None:
    """Passes until stopped; after each, the events written are committed, then the state that counts them.

    Each state saved is a new file: ``own`` learns its identity before the next pass lists the files.
    """
    last_saved: saved.FollowState | None = None
    if state_path is not None:  # before any event is written: one the state cannot count is written again
        marks, opened = (previous.files, previous.files_opened) if previous else ((), False)
        device, inode = events.identity
        last_saved = saved.FollowState(marks, events.path, events.commit(), device, inode, files_opened=opened)
        saved.save(state_path, last_saved)
        own.saved(state_path)
    while True:
        behind = tailer.poll(follower, stopping.is_set)
        follower.started = True
        follower.expire()
        size = events.commit()
        if state_path is not None:
            now = follower.state(size)
            if now != last_saved:
                saved.save(state_path, now)
                own.saved(state_path)
                last_saved = now
        if stopping.is_set():
            break
        if not behind:
            waker.wait()
    if state_path is None:
        follower.finish()
        events.commit()


def _exports(
    stack: ExitStack, port: int | None, host: str, otlp: str | None, say: Callable[[str], None], *, label_values: int
) -> tuple[list[Observer], list[Observer]]:
    """The gauges (served to Prometheus, exported over OTLP) that the events of the followed logs feed; the exports.

    The OTLP export reads the gauges and sends each event written as a log record: it is an export,
    told no event a restart or ``--new-only`` reads without writing.
    """
    if port is None and otlp is None:
        return [], []
    from kvlog import metrics  # noqa: PLC0415 - the follow extra, needed only with these options

    series = metrics.MemorySeries(label_values=label_values, ledger=metrics.LedgerFigures())
    if port is not None:
        endpoint = stack.enter_context(metrics.start_endpoint(series, host, port))
        say(f"serving metrics at {endpoint.url}")
    if otlp is None:
        return [series], []
    from kvlog import otel  # noqa: PLC0415 - the otel extra

    return [series], [stack.enter_context(otel.export(otlp, series=series))]


def _resume_output(previous: saved.FollowState, events: EventOutput, say: Callable[[str], None]) -> None:
    """Cut the output back to what the state counts; say where the events it counts are not there to be found."""
    shown = printable_name(events.name)
    if previous.output != events.path:
        if previous.files:  # their events are not written again here
            written = "standard output" if previous.output is None else printable_name(previous.output)
            say(f"{shown}: the state counts the events written to {written}; only later ones are written here")
        return
    if previous.output_size is None:
        return
    if previous.output_inode is not None and (previous.output_device, previous.output_inode) != events.identity:
        say(
            f"{shown}: not the file the state counted events in (replaced?): nothing cut; "
            "the events it counts are not written again"
        )
    elif not events.cut_to(previous.output_size):
        say(f"{shown}: shorter than when the state was saved; events are appended to what is there")


def _own_files(events: EventOutput, state: Path | None) -> tuple[str, ...]:
    """The names given to the files the follower writes (``-o``, ``--state`` and its lock).

    Found there by a pattern (``logs/*`` with ``-o logs/...``) they are not read, and go unsaid; found
    under another name (rotated, linked) they are not read either, and said.
    """
    written = [] if state is None else [str(state), str(saved.lock_path(state))]
    return (*written, events.path) if events.path else tuple(written)


def _adopt_rotated(previous: saved.FollowState, tailer: Tailer, follower: Follower, say: Callable[[str], None]) -> None:
    """Files of the state no pattern names now, renamed away (by logrotate, meanwhile): read on to their end.

    Each is looked for by its inode: where it was, else beside it (``server.log.1``). One still at the
    name it had when no rename took it away is not followed: the patterns changed, and no longer name it.
    """
    matched = set(tailer.matching().values())
    for mark in previous.files:
        key = FileKey(mark.device, mark.inode)
        if key in matched:
            continue  # the first pass finds it
        where = Path(mark.path)
        try:
            status = where.stat()
            found: Path | None = where if (status.st_dev, status.st_ino) == (key.device, key.inode) else None
        except OSError:
            found = None
        if found is not None and not mark.draining:
            say(f"{printable_name(mark.path)}: no pattern names it any more: not followed")
            continue
        found = found or find_beside(where.parent, key)
        if found is None or tailer.adopt(str(found), follower, key) is None:
            say(
                f"{printable_name(mark.path)}: renamed away while it was not followed, and not found beside it: "
                "lines after line "
                f"{mark.line} were not read"
            )


@contextmanager
def _stopped_by_signals(
    stop: threading.Event, wake: Callable[[], None], events: EventOutput, *, resumable: bool
) -> Iterator[None]:
    """The stop signals set ``stop`` and end the current wait (instead of stopping at once).

    The run then ends where it can save its state. Signals reach the main thread only: a run in
    another thread is stopped by its caller's ``stop``. After a stop, a write of events that moves no
    byte for ``STALL_PATIENCE_S`` (a reader that stopped reading; ``kvlog.follow.stall``) ends the run
    with an ``OutputError``: the events not yet written are dropped and the state is not saved again,
    so the one on disk counts only events that were written (``resumable``: a restart writes the rest).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    watch = StallWatch(events.descriptor, lambda: events.writing, STALL_PATIENCE_S)

    def stopped(signum: int, _frame: object) -> None:
        stop.set()
        wake()
        watch.start(signum)
        if watch.stalled_write():
            events.abandon()
            restart = "; a restart with the same --state writes them" if resumable else ""
            raise OutputError(
                f"{events.name}: its reader took no byte for {STALL_PATIENCE_S:g} s after a stop: "
                f"the events not yet written are dropped{restart}"
            )

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, stopped)
    try:
        yield
    finally:
        watch.close()
        for signum, handler in before.items():
            signal.signal(signum, handler)
