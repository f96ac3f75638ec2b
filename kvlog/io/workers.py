"""Worker processes for ``--jobs``: results in input order, a dead worker an error, never a wait for ever.

``multiprocessing.Pool`` replaces a worker that died (the OOM killer, a stray ``kill -9``) and waits
for its task for ever, and its ``terminate()`` can hang on a lock a dying worker held (SIGTERM to the
whole process group hung ``validate --jobs`` 1 run in 4). ``ProcessPoolExecutor`` notices a death and
shuts down without signalling its workers. Workers are forked on Linux (cheap, and the parent's
loaded catalog comes along) and spawned elsewhere.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from kvlog.errors import KvlogError
from kvlog.io.stopping import held_back

Item = TypeVar("Item")
Result = TypeVar("Result")


class WorkerDied(KvlogError):
    """A worker process ended before its task did; the results not yet yielded are lost."""


def in_order(
    function: Callable[[Item], Result],
    items: Iterable[Item],
    *,
    workers: int,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> Generator[Result, None, None]:
    """``function`` over ``items`` in ``workers`` processes, yielding the results in the order of ``items``.

    Close the iterator (``contextlib.closing``) when stopping early: that cancels what has not started
    and waits for what has.
    """
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform == "linux" else "spawn"
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context(method), initializer=initializer, initargs=initargs
    )
    try:
        with held_back():  # a stop signal while the pool starts its threads would leave one unjoinable
            results = pool.map(function, items)
        yield from results
    except BrokenProcessPool:
        raise WorkerDied("a worker process ended unexpectedly (killed?)") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
