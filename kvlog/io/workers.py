"""Worker processes for ``--jobs``: results in input order, a dead worker an error, never a wait for ever.

``multiprocessing.Pool`` replaces a worker that died (the OOM killer, a stray ``kill -9``) and waits
for its task for ever, and its ``terminate()`` can hang on a lock a dying worker held (SIGTERM to the
whole process group hung ``validate --jobs`` 1 run in 4). ``ProcessPoolExecutor`` notices a death and
shuts down without signalling its workers. Workers are forked on Linux (cheap, and the parent's
loaded catalog comes along) and spawned elsewhere.

What a task needs that is costly to build (a validator, a migrator with its parsers) is built once
per worker, by ``start``, and handed to every task that worker runs: sent with each task, it would
be pickled and rebuilt for every chunk or file. What the tasks count comes back in parts, folded
by ``kvlog.io.counts.add_counts``.

Where the tasks run is an ``Engine``: ``Processes`` (this machine's worker processes) or, with the
fleet extra, ``kvlog.fleet.RayCluster``. The callers (``kvlog.migration.batch``, ``kvlog.file_validation``)
are written once against the protocol.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool, _ExecutorManagerThread
from contextlib import contextmanager
from functools import partial
from typing import Any, Protocol, TypeVar

from kvlog.io.errors import WorkerDied
from kvlog.io.progress import task_reads_go_to
from kvlog.io.stopping import held_back

Item = TypeVar("Item")
Result = TypeVar("Result")
State = TypeVar("State")

#: in a worker process: what its ``start`` built, handed to each of its tasks
_state: Any = None
#: how often the parent reads the bytes its workers have read, while it waits for a result
READ_POLL_S = 0.25


class Engine(Protocol):
    """Where tasks run: results in the order of their items, whichever worker finished first."""

    #: whether the tasks run on this machine, and so read and write the files this process sees
    @property
    def local(self) -> bool: ...

    #: how many tasks run at once
    @property
    def workers(self) -> int: ...

    def in_order(
        self,
        function: Callable[[Any, Any], Any],
        items: Iterable[Any],
        *,
        start: Callable[..., Any],
        start_args: tuple[Any, ...],
        streamed: tuple[str, ...] = (),
        lost: Callable[[Any, str], Any] | None = None,
        on_read: Callable[[int], None] | None = None,
    ) -> Generator[Any, None, None]:
        """``function(state, item)`` for each item, as ``in_order`` (below) describes.

        ``streamed`` names the fields of a result that hold the paths of files its task wrote, for the
        caller to read: an engine whose tasks run elsewhere brings each file's content back to a file
        of this machine and names that one instead. ``lost(item, reason)`` is the result of an item
        whose task was lost for good (its node died as often as the engine retries); without it, or on
        an engine that cannot lose one task alone, a lost task ends the run with ``WorkerDied``.
        ``on_read(count)`` hears of the input bytes tasks report (``kvlog.io.progress.read_in_task``)
        before their results come, in this process, while it waits: the reads of the task whose
        result is next (a Ray task's stream), or of any task running (worker processes).
        """
        ...


class Processes:
    """The local engine: ``workers`` processes of this machine (``--jobs``)."""

    local = True

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def in_order(
        self,
        function: Callable[[Any, Any], Any],
        items: Iterable[Any],
        *,
        start: Callable[..., Any],
        start_args: tuple[Any, ...],
        streamed: tuple[str, ...] = (),  # the files are this machine's already
        lost: Callable[[Any, str], Any] | None = None,  # a dead process breaks the whole pool
        on_read: Callable[[int], None] | None = None,
    ) -> Generator[Any, None, None]:
        """See ``Engine.in_order``: a worker that dies breaks the pool, so it raises ``WorkerDied``."""
        return in_order(function, items, workers=self.workers, start=start, start_args=start_args, on_read=on_read)


def in_order(
    function: Callable[[State, Item], Result],
    items: Iterable[Item],
    *,
    workers: int,
    start: Callable[..., State],
    start_args: tuple[Any, ...],
    on_read: Callable[[int], None] | None = None,
) -> Generator[Result, None, None]:
    """``function(state, item)`` for ``items`` in ``workers`` processes, the results in the order of ``items``.

    ``state`` is what ``start(*start_args)`` returned in the worker that runs the task: it runs once
    in each worker as it starts (and may set up the worker's signals). Close the iterator
    (``contextlib.closing``) when stopping early: that cancels what has not started and waits for
    what has. ``on_read`` hears, every ``READ_POLL_S`` while a result is awaited, how many more
    bytes the tasks reported read (``kvlog.io.progress.read_in_task``), through a shared counter.
    """
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform == "linux" else "spawn"
    context = multiprocessing.get_context(method)
    read = context.Value("q", 0) if on_read is not None else None
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start, initargs=(start, start_args, read))
    with _cancelled_results_ignored():
        try:
            with held_back():  # a stop signal while the pool starts its threads would leave one unjoinable
                futures = [pool.submit(_task, function, item) for item in items]
            yield from _awaited(futures, read, on_read)
        except BrokenProcessPool:
            raise WorkerDied("a worker process ended unexpectedly (killed?)") from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _cancelled_results_ignored() -> Iterator[None]:
    """While the pool runs, a result arriving for a task just cancelled is dropped, not a traceback.

    CPython 3.11's executor manager thread sets the result of every task a worker finished, and one
    cancelled meanwhile (by ``map``'s iterator as a stop unwinds it, or by ``cancel_futures``) raises
    ``InvalidStateError`` there, which the thread prints as a traceback (a stopped ``validate --jobs``
    showed one, 1 run in about 50). The result is not wanted: the run is stopping. Any other
    exception of any thread is printed as before.
    """
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if not (args.exc_type is InvalidStateError and isinstance(args.thread, _ExecutorManagerThread)):
            previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def _awaited(futures: list[Future[Result]], read: Any, on_read: Callable[[int], None] | None) -> Iterator[Result]:
    """The results in order; with a shared counter ``read``, ``on_read`` hears what it gained while waiting."""
    told = 0
    for future in futures:
        if read is None or on_read is None:  # nobody watches: wait for the result, and only for it
            yield future.result()
            continue
        while True:
            try:
                result = future.result(timeout=READ_POLL_S)
            except TimeoutError:
                result_came = False
            else:
                result_came = True
            now = int(read.value)
            if now > told:
                on_read(now - told)
                told = now
            if result_came:
                break
        yield result


def _start(start: Callable[..., object], start_args: tuple[Any, ...], read: Any = None) -> None:
    global _state  # noqa: PLW0603 - one state per worker process, built once
    if read is not None:
        task_reads_go_to(partial(_add, read))
    _state = start(*start_args)


def _add(read: Any, count: int) -> None:
    """In a worker: ``count`` more bytes read, added to the counter the parent reads."""
    with read.get_lock():
        read.value += count


def _task(function: Callable[[Any, Item], Result], item: Item) -> Result:
    return function(_state, item)
